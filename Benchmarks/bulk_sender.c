/* The TLS upstream for Benchmarks/relay.py's throughput rows, in C so that it outruns every relay
 * it is measured through (Benchmarks/bulk_server.py, Python `ssl`, is slower than pinproxy's relay,
 * which hid the gap to the ceiling; `openssl s_server -WWW` serves one connection at a time, writes
 * 16 KiB per write and needs the body as a file). One process per connection (fork), so the
 * parallel rounds get one sender each; each answers every GET with SIZE zero bytes, or N bytes for
 * `GET /bytes/N`, 1 MiB per SSL_write. Listens on 127.0.0.1 only; every child ends when its
 * connection does or is silent for 60 s, or when the parent goes; the harness kills the parent.
 *   cc -O2 -o bulk_sender Benchmarks/bulk_sender.c -lssl -lcrypto
 *   bulk_sender PORT KEY CHAIN 1.2|1.3 SIZE            (CHAIN: the leaf and its intermediate, PEM) */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

enum { BLOCK = 1 << 20, HEAD_MAX = 65536 };

static void serve(SSL_CTX *context, int fd, long long size) {
    static char block[BLOCK];
    char head[HEAD_MAX + 1];
    struct timeval limit = {.tv_sec = 60};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
    SSL *ssl = SSL_new(context);
    SSL_set_fd(ssl, fd);
    if (SSL_accept(ssl) != 1) goto out;
    for (;;) {  /* one request after another on the connection, like bulk_server.py */
        int length = 0; char *end = NULL;
        while (!end && length < HEAD_MAX) {
            int n = SSL_read(ssl, head + length, HEAD_MAX - length);
            if (n <= 0) goto out;
            length += n; head[length] = 0;
            end = strstr(head, "\r\n\r\n");
        }
        if (!end) goto out;
        long long body = size, asked;
        if (sscanf(head, "GET /bytes/%lld ", &asked) == 1 && asked >= 0) body = asked;
        char answer[128];
        int n = snprintf(answer, sizeof answer, "HTTP/1.1 200 OK\r\nContent-Length: %lld\r\n\r\n", body);
        if (SSL_write(ssl, answer, n) != n) goto out;
        for (long long left = body; left > 0;) {
            int chunk = left < BLOCK ? (int)left : BLOCK;
            if (SSL_write(ssl, block, chunk) != chunk) goto out;
            left -= chunk;
        }
    }
out:
    SSL_free(ssl);
    close(fd);
}

int main(int argc, char **argv) {
    if (argc != 6) { fprintf(stderr, "usage: %s PORT KEY CHAIN 1.2|1.3 SIZE\n", argv[0]); return 2; }
    SSL_CTX *context = SSL_CTX_new(TLS_server_method());
    int version = strcmp(argv[4], "1.2") == 0 ? TLS1_2_VERSION : TLS1_3_VERSION;
    SSL_CTX_set_min_proto_version(context, version);
    SSL_CTX_set_max_proto_version(context, version);
    if (SSL_CTX_use_certificate_chain_file(context, argv[3]) != 1 || SSL_CTX_use_PrivateKey_file(context, argv[2], SSL_FILETYPE_PEM) != 1) {
        ERR_print_errors_fp(stderr);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    signal(SIGCHLD, SIG_IGN);  /* children are reaped by the kernel */
    int listener = socket(AF_INET, SOCK_STREAM, 0), on = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    struct sockaddr_in at = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(listener, (struct sockaddr *)&at, sizeof at) != 0 || listen(listener, 128) != 0) { perror("listen"); return 1; }
    long long size = atoll(argv[5]);
    for (;;) {
        int fd = accept(listener, NULL, NULL);
        if (fd < 0) continue;
        pid_t child = fork();
        if (child == 0) { close(listener); prctl(PR_SET_PDEATHSIG, SIGTERM); serve(context, fd, size); _exit(0); }
        close(fd);
    }
}
