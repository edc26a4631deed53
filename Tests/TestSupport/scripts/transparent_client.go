// Go net/http with a Transport of its own (no ProxyFromEnvironment, as many Go programs build it),
// for the transparent-mode tests: one GET to URL, dialling ADDRESS (the namespace's redirect sends
// it to pinproxy). Prints "go STATUS" or "go error".
//
//	transparent_client URL ADDRESS:PORT CA.pem
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"
)

func main() {
	pem, err := os.ReadFile(os.Args[3])
	if err != nil {
		fmt.Println("go error reading the CA file")
		return
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	transport := &http.Transport{
		Proxy:           nil,
		TLSClientConfig: &tls.Config{RootCAs: roots},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, network, os.Args[2])
		},
	}
	client := &http.Client{Transport: transport, Timeout: 15 * time.Second}
	response, err := client.Get(os.Args[1])
	if err != nil {
		fmt.Println("go error")
		return
	}
	response.Body.Close()
	fmt.Println("go", response.StatusCode)
}
