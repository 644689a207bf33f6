package nstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"time"
)

// CertFiles is a throwaway CA and a server certificate it signed, as PEM
// files. CAFile and CertFile are world-readable; KeyFile is root's only.
type CertFiles struct {
	CA       *x509.Certificate
	CAFile   string
	CertFile string
	KeyFile  string
}

// CAPool returns a pool holding only the CA, for in-process clients.
func (c *CertFiles) CAPool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(c.CA)
	return pool
}

// GenerateCerts writes ca.pem, server.pem and server.key into dir: a new
// ECDSA P-256 CA and a server certificate for dnsName and ips, valid from
// an hour ago for a day. The CA key is never written.
func GenerateCerts(dir, dnsName string, ips ...netip.Addr) (*CertFiles, error) {
	ca, caKey, err := newCA()
	if err != nil {
		return nil, err
	}
	leafDER, leafKey, err := newLeaf(ca, caKey, dnsName, ips)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(leafKey)
	if err != nil {
		return nil, fmt.Errorf("marshal server key: %w", err)
	}
	cf := &CertFiles{
		CA:       ca,
		CAFile:   filepath.Join(dir, "ca.pem"),
		CertFile: filepath.Join(dir, "server.pem"),
		KeyFile:  filepath.Join(dir, "server.key"),
	}
	for _, f := range []struct {
		path, typ string
		der       []byte
		mode      os.FileMode
	}{
		{cf.CAFile, "CERTIFICATE", ca.Raw, 0o644},
		{cf.CertFile, "CERTIFICATE", leafDER, 0o644},
		{cf.KeyFile, "PRIVATE KEY", keyDER, 0o600},
	} {
		if err := writePEM(f.path, f.typ, f.der, f.mode); err != nil {
			return nil, err
		}
	}
	return cf, nil
}

func newCA() (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate CA key: %w", err)
	}
	tmpl := certTemplate("nstest CA")
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("create CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	return ca, key, nil
}

func newLeaf(ca *x509.Certificate, caKey *ecdsa.PrivateKey, dnsName string, ips []netip.Addr) ([]byte, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate server key: %w", err)
	}
	tmpl := certTemplate(dnsName)
	tmpl.DNSNames = []string{dnsName}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.IP(ip.AsSlice()))
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("create server certificate: %w", err)
	}
	return der, key, nil
}

func certTemplate(commonName string) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64)) // never fails: crypto/rand panics instead
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: commonName, Organization: []string{"meshlaunch nstest"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
	}
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	data := pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
	if err := os.WriteFile(path, data, mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
