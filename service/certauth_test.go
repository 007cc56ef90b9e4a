package service

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

// testCA issues certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue makes a certificate for a server (dns) or a client (usage).
func (ca *testCA) issue(t *testing.T, subject pkix.Name, uris []string, usage x509.ExtKeyUsage) tls.Certificate {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: subject, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{usage}, DNSNames: []string{"localhost"}}
	for _, u := range uris {
		parsed, _ := url.Parse(u)
		tmpl.URIs = append(tmpl.URIs, parsed)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func writePEM(t *testing.T, dir string, c tls.Certificate) (certFile, keyFile string) {
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	keyDER, _ := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// A client certificate from the client CA whose subject or URI SAN is a principal's
// cert_subject authenticates as that principal, on native gRPC and on Connect; one from
// another CA is refused at the handshake, and a certificate mapped to no principal
// authenticates nobody.
func TestClientCertificates(t *testing.T) {
	ca, other := newTestCA(t), newTestCA(t)
	dir := t.TempDir()
	certFile, keyFile := writePEM(t, dir, ca.issue(t, pkix.Name{CommonName: "localhost"}, nil, x509.ExtKeyUsageServerAuth))
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{tlsCert: certFile, tlsKey: keyFile, clientCA: caFile, principals: []StaticPrincipal{
		{Name: "ci-bot", Scopes: ScopeRead, CertSubject: "CN=ci-bot,O=example"},
		{Name: "mesh-svc", Scopes: ScopeRead | ScopeWrite, CertSubject: "spiffe://example.org/ns/prod/sa/svc"},
	}})
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	clientTLS := func(certs ...tls.Certificate) *tls.Config {
		return &tls.Config{RootCAs: roots, ServerName: "localhost", Certificates: certs, MinVersion: tls.VersionTLS12}
	}
	whoAmI := func(cfg *tls.Config) (*pb.Caller, error) {
		conn, err := grpc.NewClient("passthrough:///bufnet",
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return e.lis.DialContext(ctx) }),
			grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		info, err := pb.NewAgenticServiceClient(conn).GetServerInfo(bg, &pb.GetServerInfoRequest{})
		return info.GetCaller(), err
	}
	bot := ca.issue(t, pkix.Name{CommonName: "ci-bot", Organization: []string{"example"}}, nil, x509.ExtKeyUsageClientAuth)
	caller, err := whoAmI(clientTLS(bot))
	if err != nil || caller.GetPrincipal() != "ci-bot" || caller.GetVia() != viaCert {
		t.Fatalf("ci-bot's certificate: %v, %v", caller, err)
	}
	spiffe := ca.issue(t, pkix.Name{CommonName: "whatever"}, []string{"spiffe://example.org/ns/prod/sa/svc"}, x509.ExtKeyUsageClientAuth)
	if caller, err := whoAmI(clientTLS(spiffe)); err != nil || caller.GetPrincipal() != "mesh-svc" {
		t.Fatalf("a SPIFFE id: %v, %v", caller, err)
	}
	unmapped := ca.issue(t, pkix.Name{CommonName: "nobody"}, nil, x509.ExtKeyUsageClientAuth)
	_, err = whoAmI(clientTLS(unmapped))
	wantCode(t, err, codes.Unauthenticated)
	_, err = whoAmI(clientTLS())
	wantCode(t, err, codes.Unauthenticated)
	_, err = whoAmI(clientTLS(other.issue(t, pkix.Name{CommonName: "ci-bot", Organization: []string{"example"}}, nil, x509.ExtKeyUsageClientAuth)))
	wantCode(t, err, codes.Unavailable) // the handshake fails
	// The HTTP side (Connect) sees the same certificate.
	tr := &http.Transport{DialTLSContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		c, err := e.lis.DialContext(ctx)
		if err != nil {
			return nil, err
		}
		return tls.Client(c, clientTLS(bot)), nil
	}}
	t.Cleanup(tr.CloseIdleConnections)
	cl := connect.NewClient[pb.GetServerInfoRequest, pb.GetServerInfoResponse](&http.Client{Transport: tr},
		"https://localhost/"+pb.AgenticService_ServiceDesc.ServiceName+"/GetServerInfo")
	resp, err := cl.CallUnary(bg, connect.NewRequest(&pb.GetServerInfoRequest{}))
	if err != nil || resp.Msg.GetCaller().GetPrincipal() != "ci-bot" {
		t.Fatalf("Connect with ci-bot's certificate: %v, %v", resp, err)
	}
}
