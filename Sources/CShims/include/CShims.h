#pragma once
// pinproxy's C shim: one wrapper per OpenSSL macro that Swift cannot import (function-like macros and
// SSL_OP_* constants built with SSL_OP_BIT). No logic lives here; each says which macro it stands for.
// If Swift ever imports these macros, delete the wrapper and call the real name.

struct ssl_st;
struct ssl_ctx_st;

/// SSL_set_tlsext_host_name(ssl, name): macro over SSL_ctrl.
int pp_SSL_set_tlsext_host_name(struct ssl_st *ssl, const char *name);
/// SSL_CTX_set_min_proto_version(ctx, v): macro over SSL_CTX_ctrl.
int pp_SSL_CTX_set_min_proto_version(struct ssl_ctx_st *ctx, int version);
/// SSL_CTX_set1_groups_list(ctx, list): macro over SSL_CTX_ctrl.
int pp_SSL_CTX_set1_groups_list(struct ssl_ctx_st *ctx, const char *list);
/// SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF): macro over SSL_CTX_ctrl.
long pp_SSL_CTX_disable_session_cache(struct ssl_ctx_st *ctx);
/// SSL_OP_NO_COMPRESSION | SSL_OP_NO_TICKET...: SSL_OP_* constants use SSL_OP_BIT() and do not import.
unsigned long long pp_SSL_OP_NO_COMPRESSION(void);
/// OPENSSL_free(p): macro over CRYPTO_free(p, __FILE__, __LINE__).
void pp_OPENSSL_free(void *p);
/// XN_FLAG_RFC2253: a composite flag macro (ASN1_STRFLGS_RFC2253 | XN_FLAG_SEP_COMMA_PLUS | …) that does not import.
unsigned long pp_XN_FLAG_RFC2253(void);
/// SSL_set_msg_callback_arg(ssl, arg): macro over SSL_ctrl.
long pp_SSL_set_msg_callback_arg(struct ssl_st *ssl, void *arg);
/* SSL_get_tlsext_status_ocsp_resp: the stapled OCSP response the server sent (length, or -1). */
long pp_SSL_get_tlsext_status_ocsp_resp(struct ssl_st *ssl, const unsigned char **response);

/// fallocate(fd, mode, offset, length): glibc declares it only under _GNU_SOURCE, so Swift's Glibc
/// module does not import it. The key-log intake punches holes with it (FALLOC_FL_PUNCH_HOLE).
int pp_fallocate(int fd, int mode, long long offset, long long length);
/// memmem and memrchr (GNU): the key-log intake looks for the randoms tunnels wait for in a flood.
const void *pp_memmem(const void *haystack, unsigned long haystackLength, const void *needle, unsigned long needleLength);
const void *pp_memrchr(const void *bytes, int byte, unsigned long length);
