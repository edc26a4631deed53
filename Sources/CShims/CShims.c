#define _GNU_SOURCE
#include <fcntl.h>
#include <string.h>
#include <sys/types.h>
#include <openssl/ssl.h>
#include "CShims.h"

int pp_SSL_set_tlsext_host_name(SSL *ssl, const char *name) { return (int)SSL_set_tlsext_host_name(ssl, name); }
int pp_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version) { return (int)SSL_CTX_set_min_proto_version(ctx, version); }
int pp_SSL_CTX_set1_groups_list(SSL_CTX *ctx, const char *list) { return (int)SSL_CTX_set1_groups_list(ctx, list); }
long pp_SSL_CTX_disable_session_cache(SSL_CTX *ctx) { return SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF); }
unsigned long long pp_SSL_OP_NO_COMPRESSION(void) { return (unsigned long long)SSL_OP_NO_COMPRESSION; }
void pp_OPENSSL_free(void *p) { OPENSSL_free(p); }
unsigned long pp_XN_FLAG_RFC2253(void) { return XN_FLAG_RFC2253; }
long pp_SSL_set_msg_callback_arg(SSL *ssl, void *arg) { return SSL_set_msg_callback_arg(ssl, arg); }
int pp_fallocate(int fd, int mode, long long offset, long long length) { return fallocate(fd, mode, (off_t)offset, (off_t)length); }
const void *pp_memmem(const void *haystack, unsigned long haystackLength, const void *needle, unsigned long needleLength) { return memmem(haystack, haystackLength, needle, needleLength); }
const void *pp_memrchr(const void *bytes, int byte, unsigned long length) { return memrchr(bytes, byte, length); }

long pp_SSL_get_tlsext_status_ocsp_resp(SSL *ssl, const unsigned char **response) {
    return SSL_get_tlsext_status_ocsp_resp(ssl, (unsigned char **)response);
}
