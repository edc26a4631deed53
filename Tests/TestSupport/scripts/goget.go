// A Go net/http client that finds its proxy the standard way (http.ProxyFromEnvironment, which
// reads HTTPS_PROXY / https_proxy) and trusts only the given CA file.
//   goget URL CAFILE   prints 'OK <status> <body>' or 'ERROR <error>'
package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	pem, err := os.ReadFile(os.Args[2])
	if err != nil {
		fmt.Println("ERROR", err)
		return
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	client := &http.Client{
		Timeout: 20 * time.Second,
		Transport: &http.Transport{
			Proxy:           http.ProxyFromEnvironment,
			TLSClientConfig: &tls.Config{RootCAs: roots},
		},
	}
	response, err := client.Get(os.Args[1])
	if err != nil {
		fmt.Println("ERROR", err)
		return
	}
	defer response.Body.Close()
	body, _ := io.ReadAll(response.Body)
	fmt.Println("OK", response.StatusCode, strings.TrimSpace(string(body)))
}
