package service

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"

	"google.golang.org/grpc/peer"
)

// certAddr is the local address of a TLS connection whose client presented a
// certificate the client CA verified: it carries the certificate's ids to the
// credentials check, on native gRPC (peer.LocalAddr) and HTTP (http.LocalAddrContextKey,
// which grpc-go's handler transport copies) alike. Nothing a client sends can make one.
type certAddr struct {
	net.Addr
	ids []string
}

// certListener hands out TLS connections whose LocalAddr, once the handshake is done,
// is a certAddr when the client's certificate verified.
type certListener struct{ net.Listener }

func (l certListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*tls.Conn); ok {
		return certConn{tc}, nil
	}
	return c, nil
}

type certConn struct{ *tls.Conn }

// LocalAddr is read after the first request arrived, so after the handshake.
func (c certConn) LocalAddr() net.Addr {
	st := c.ConnectionState()
	if !st.HandshakeComplete || len(st.VerifiedChains) == 0 {
		return c.Conn.LocalAddr()
	}
	return certAddr{Addr: c.Conn.LocalAddr(), ids: certIDs(st.VerifiedChains[0][0])}
}

// certIDs are what a principal's cert_subject may name: the subject's distinguished
// name (as crypto/x509 spells it, e.g. "CN=ci-bot,O=example"), its common name, and each
// URI SAN (e.g. a SPIFFE id).
func certIDs(cert *x509.Certificate) []string {
	ids := []string{cert.Subject.String()}
	if cn := cert.Subject.CommonName; cn != "" {
		ids = append(ids, cn)
	}
	for _, u := range cert.URIs {
		ids = append(ids, u.String())
	}
	return ids
}

// clientCertIDs are the ids of ctx's caller's verified client certificate; nil without.
func clientCertIDs(ctx context.Context) []string {
	if p, ok := peer.FromContext(ctx); ok {
		if a, ok := p.LocalAddr.(certAddr); ok {
			return a.ids
		}
	}
	return nil
}
