// Package client builds what a Switchyard service needs to call another:
// an HTTP client that speaks HTTP/2 without TLS (h2c), as every Switchyard
// server does. One constructor, so every caller gets the same pooling and
// dead-peer detection.
package client

import (
	"net/http"
	"time"
)

// NewHTTP returns an h2c client. It has no overall timeout: streams are
// bounded by their contexts. HTTP/2 pings find a peer that vanished without
// closing its connection (a killed process on another machine), so a stream
// to it fails instead of hanging.
func NewHTTP() *http.Client {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{
		Protocols:           p,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
		HTTP2: &http.HTTP2Config{
			SendPingTimeout: 15 * time.Second,
			PingTimeout:     10 * time.Second,
		},
	}}
}
