// A Go net/http client for resumption_cut.py (issue 18 item 5): N GETs of URL, each on a new
// connection (keep-alives off, as if each were a new tunnel), trusting only CAFILE.
//   resume_go URL CAFILE N default|cache [ADDRESS]
// 'default' is http.Transport as it comes (no ClientSessionCache); 'cache' sets
// tls.NewLRUClientSessionCache. With ADDRESS (127.0.0.1:port) every connection goes there whatever
// the URL's host (curl's --connect-to). Prints one line per request: 'OK <status> resumed=<bool>' or 'ERROR <error>'.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
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
	count, _ := strconv.Atoi(os.Args[3])
	config := &tls.Config{RootCAs: roots}
	if os.Args[4] == "cache" {
		config.ClientSessionCache = tls.NewLRUClientSessionCache(0)
	}
	transport := &http.Transport{TLSClientConfig: config, DisableKeepAlives: true}
	if len(os.Args) > 5 {
		address := os.Args[5]
		transport.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, address)
		}
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: transport}
	for i := 0; i < count; i++ {
		response, err := client.Get(os.Args[1])
		if err != nil {
			fmt.Println("ERROR", err)
			continue
		}
		body, _ := io.ReadAll(response.Body)
		response.Body.Close()
		fmt.Println("OK", response.StatusCode, "resumed="+strconv.FormatBool(response.TLS.DidResume), strings.TrimSpace(string(body)))
	}
}
