#pragma once
// libc headers first: event2/event-config.h defines _GNU_SOURCE, and a module whose first include is an
// event2 header would see different glibc feature macros than COpenSSL does (fd_set ODR errors).
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
// malloc_trim: Swift's Glibc module does not export malloc.h; ProxyCore hands memory back after bursts.
#include <malloc.h>
#include <event2/event.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/listener.h>
#include <event2/dns.h>
#include <event2/thread.h>
#include <event2/util.h>
