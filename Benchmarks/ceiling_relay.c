/* The ceiling for Benchmarks/relay.py: the least a CONNECT relay can do. It answers
 * `CONNECT 127.x.y.z:PORT` with 200 and then relays bytes both ways, with no TLS of its own (like
 * pinproxy's tunnel), one thread per tunnel, blocking sockets:
 *   copy    read(2) into a 256 KiB buffer, write(2) it all out;
 *   splice  splice(2) from the socket into a pipe (256 KiB) and from the pipe to the other socket.
 * Loopback only: it listens on 127.0.0.1 and connects only to numeric 127.0.0.0/8 targets. Bounded:
 * at most MAX_TUNNELS at once, a tunnel silent both ways for IDLE_MS ends, and the harness kills it.
 *   cc -O2 -pthread -o ceiling_relay Benchmarks/ceiling_relay.c
 *   ceiling_relay copy|splice PORT            (prints nothing; listens until killed) */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

enum { BUFFER = 256 << 10, HEAD_MAX = 8192, MAX_TUNNELS = 1024, IDLE_MS = 120000 };
enum mode { COPY, SPLICE };

static enum mode mode;
static atomic_int tunnels;

/* Writes all n bytes; 0 on success. */
static int write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w; n -= (size_t)w;
    }
    return 0;
}

/* One direction's step once `from` is readable: >0 bytes moved, 0 end of stream, <0 error. */
static ssize_t copy_step(int from, int to, char *buffer) {
    ssize_t n = read(from, buffer, BUFFER);
    if (n > 0 && write_all(to, buffer, (size_t)n) != 0) return -1;
    return n;
}

static ssize_t splice_step(int from, int to, int pipe_in, int pipe_out) {
    ssize_t n = splice(from, NULL, pipe_in, NULL, BUFFER, SPLICE_F_MOVE);
    for (ssize_t left = n; left > 0;) {
        ssize_t w = splice(pipe_out, NULL, to, NULL, (size_t)left, SPLICE_F_MOVE);
        if (w <= 0) return -1;
        left -= w;
    }
    return n;
}

/* The CONNECT target when it is a numeric loopback address; -1 otherwise. `head` ends in NUL. */
static int parse_connect(const char *head, struct sockaddr_in *to) {
    char host[64]; unsigned port;
    if (sscanf(head, "CONNECT %63[0-9.]:%u HTTP/1.", host, &port) != 2 || port == 0 || port > 65535) return -1;
    memset(to, 0, sizeof *to);
    to->sin_family = AF_INET; to->sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &to->sin_addr) != 1 || (ntohl(to->sin_addr.s_addr) >> 24) != 127) return -1;
    return 0;
}

static void relay(int client, int upstream, const char *early, size_t early_length) {
    char *buffer = mode == COPY ? malloc(BUFFER) : NULL;
    int pipes[2][2] = {{-1, -1}, {-1, -1}};  /* [0]: client → upstream, [1]: upstream → client */
    if (mode == COPY && !buffer) return;
    if (mode == SPLICE) {
        for (int d = 0; d < 2; d++) {
            if (pipe2(pipes[d], O_CLOEXEC) != 0) goto done;
            fcntl(pipes[d][1], F_SETPIPE_SZ, BUFFER);  /* best effort: the default is 64 KiB */
        }
    }
    if (early_length && write_all(upstream, early, early_length) != 0) goto done;
    struct pollfd fds[2] = {{.fd = client, .events = POLLIN}, {.fd = upstream, .events = POLLIN}};
    int open_ends = 2;
    while (open_ends > 0) {
        int ready = poll(fds, 2, IDLE_MS);
        if (ready <= 0) { if (ready < 0 && errno == EINTR) continue; break; }
        for (int d = 0; d < 2; d++) {
            if (fds[d].fd < 0 || !(fds[d].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            int from = d == 0 ? client : upstream, to = d == 0 ? upstream : client;
            ssize_t n = mode == COPY ? copy_step(from, to, buffer) : splice_step(from, to, pipes[d][1], pipes[d][0]);
            if (n < 0) goto done;
            if (n == 0) { shutdown(to, SHUT_WR); fds[d].fd = -1; open_ends--; }
        }
    }
done:
    for (int d = 0; d < 2; d++) for (int e = 0; e < 2; e++) if (pipes[d][e] >= 0) close(pipes[d][e]);
    free(buffer);
}

static void *tunnel(void *arg) {
    int client = (int)(intptr_t)arg, upstream = -1;
    char head[HEAD_MAX + 1]; size_t length = 0; char *end = NULL;
    struct timeval limit = {.tv_sec = 10};
    setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);  /* the head within 10 s */
    while (!end && length < HEAD_MAX) {
        ssize_t n = read(client, head + length, HEAD_MAX - length);
        if (n <= 0) goto out;
        length += (size_t)n; head[length] = 0;
        end = strstr(head, "\r\n\r\n");
    }
    struct sockaddr_in to;
    static const char refused[] = "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n";
    static const char failed[] = "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n";
    static const char established[] = "HTTP/1.1 200 Connection established\r\n\r\n";
    if (!end || parse_connect(head, &to) != 0) { write_all(client, refused, sizeof refused - 1); goto out; }
    upstream = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (upstream < 0 || connect(upstream, (struct sockaddr *)&to, sizeof to) != 0) { write_all(client, failed, sizeof failed - 1); goto out; }
    int on = 1;
    setsockopt(upstream, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    struct timeval none = {0};
    setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none);
    if (write_all(client, established, sizeof established - 1) != 0) goto out;
    end += 4;
    relay(client, upstream, end, length - (size_t)(end - head));
out:
    if (upstream >= 0) close(upstream);
    close(client);
    atomic_fetch_sub(&tunnels, 1);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3 || (strcmp(argv[1], "copy") && strcmp(argv[1], "splice"))) {
        fprintf(stderr, "usage: %s copy|splice PORT\n", argv[0]);
        return 2;
    }
    mode = strcmp(argv[1], "copy") == 0 ? COPY : SPLICE;
    signal(SIGPIPE, SIG_IGN);
    int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), on = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    struct sockaddr_in at = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2])), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(listener, (struct sockaddr *)&at, sizeof at) != 0 || listen(listener, 256) != 0) { perror("listen"); return 1; }
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64 << 10);  /* the head lives on it; the copy buffer is on the heap */
    for (;;) {
        int client = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
        if (client < 0) { if (errno == EINTR || errno == ECONNABORTED) continue; perror("accept"); return 1; }
        setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
        pthread_t thread;
        if (atomic_fetch_add(&tunnels, 1) >= MAX_TUNNELS || pthread_create(&thread, &attr, tunnel, (void *)(intptr_t)client) != 0) {
            atomic_fetch_sub(&tunnels, 1);
            close(client);
        }
    }
}
