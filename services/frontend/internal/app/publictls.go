package app

import (
	"errors"
	"flag"

	"switchyard.dev/libs/mesh/service"
)

// publicTLS are the flags of the OpenAI listener's own certificate: the
// API's callers are clients outside the mesh, so with them set the
// listener serves that certificate and asks callers for none, whatever
// the -tls-* (mesh) settings.
type publicTLS struct{ cert, key string }

func (p *publicTLS) register(fs *flag.FlagSet) {
	fs.StringVar(&p.cert, "public-tls-cert", "", "certificate (PEM) the OpenAI API serves over TLS, reloaded when the file changes; callers need no certificate (default: plaintext, or the -tls-cert mesh certificate)")
	fs.StringVar(&p.key, "public-tls-key", "", "private key (PEM) of -public-tls-cert")
}

func (p *publicTLS) validate() error {
	if (p.cert == "") != (p.key == "") {
		return errors.New("-public-tls-cert and -public-tls-key: set both or neither")
	}
	return nil
}

// apply switches the listener to the public certificate, if one is set.
func (p *publicTLS) apply(rt *service.Runtime) error {
	if p.cert == "" {
		return nil
	}
	return rt.ServePublicTLS(p.cert, p.key)
}
