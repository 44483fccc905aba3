package chaos

import (
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// echo serves an echo server on loopback and counts its connections.
func echo(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String(), &n
}

func roundTrip(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != msg {
		t.Fatalf("read %q, %v; want %q", buf, err, msg)
	}
}

// A partition holds an open connection's bytes and keeps a new
// connection from the target; Heal delivers both.
func TestProxyPartition(t *testing.T) {
	t.Parallel()
	target, conns := echo(t)
	p, err := NewProxy("127.0.0.1:0", target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	open, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	roundTrip(t, open, "before")

	p.Partition()
	if _, err := open.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	// Silence, not a refusal: the read times out rather than failing.
	_ = open.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := open.Read(make([]byte, 4)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read through a partition: %v, want a timeout", err)
	}
	late, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatalf("dial during a partition: %v (the proxy should accept and hold)", err)
	}
	defer late.Close()
	if _, err := late.Write([]byte("late")); err != nil {
		t.Fatal(err)
	}

	p.Heal()
	_ = open.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4)
	if _, err := io.ReadFull(open, buf); err != nil || string(buf) != "held" {
		t.Fatalf("held bytes after heal: %q, %v", buf, err)
	}
	_ = late.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(late, buf); err != nil || string(buf) != "late" {
		t.Fatalf("held connection after heal: %q, %v", buf, err)
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("target saw %d connections, want 2", n)
	}
}
