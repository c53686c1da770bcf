/*
 * The demo image's one program, /demo: a tiny HTTP server and a client that resolves a Service
 * name through the Pod's own resolv.conf. Freestanding (no libc, only Linux syscalls), so the
 * image needs no base image and no registry: cli/local/build_demo_app.sh compiles it for amd64
 * and arm64 and embeds the two static executables in cli/local/demo_app_embed.ts.
 *
 *   /demo serve [PORT]              answer every HTTP request on [::]:PORT (default 8080) with
 *                                   "$GREETING (image demo:$DEMO_VERSION, Pod $HOSTNAME)"
 *   /demo get NAME [PORT] [PATH]    resolve NAME (AAAA, the first search domain appended to a
 *                                   name without a dot) through the first nameserver of
 *                                   /etc/resolv.conf, GET http://NAME:PORT/PATH, print the answer
 *   /demo sleep                     wait (a client Pod's main process)
 *
 * SIGTERM ends it at once (as PID 1 of a container, a signal without a handler is ignored).
 */

typedef unsigned long u64;
typedef long i64;
typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;

#if defined(__x86_64__)
enum {
  SYS_read = 0, SYS_write = 1, SYS_close = 3, SYS_rt_sigaction = 13, SYS_socket = 41,
  SYS_connect = 42, SYS_accept = 43, SYS_bind = 49, SYS_listen = 50, SYS_setsockopt = 54,
  SYS_uname = 63, SYS_exit_group = 231, SYS_openat = 257, SYS_ppoll = 271
};
static i64 sys6(i64 n, i64 a, i64 b, i64 c, i64 d, i64 e, i64 f) {
  register i64 r10 __asm__("r10") = d;
  register i64 r8 __asm__("r8") = e;
  register i64 r9 __asm__("r9") = f;
  i64 ret;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                   : "rcx", "r11", "memory");
  return ret;
}
__asm__(".text\n.global _start\n_start:\n mov %rsp, %rdi\n and $-16, %rsp\n call start_c\n hlt\n");
#define SA_RESTORER_FLAG 0x04000000
#elif defined(__aarch64__)
enum {
  SYS_read = 63, SYS_write = 64, SYS_close = 57, SYS_rt_sigaction = 134, SYS_socket = 198,
  SYS_connect = 203, SYS_accept = 202, SYS_bind = 200, SYS_listen = 201, SYS_setsockopt = 208,
  SYS_uname = 160, SYS_exit_group = 94, SYS_openat = 56, SYS_ppoll = 73
};
static i64 sys6(i64 n, i64 a, i64 b, i64 c, i64 d, i64 e, i64 f) {
  register i64 x8 __asm__("x8") = n;
  register i64 x0 __asm__("x0") = a;
  register i64 x1 __asm__("x1") = b;
  register i64 x2 __asm__("x2") = c;
  register i64 x3 __asm__("x3") = d;
  register i64 x4 __asm__("x4") = e;
  register i64 x5 __asm__("x5") = f;
  __asm__ volatile("svc #0"
                   : "+r"(x0)
                   : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
                   : "memory");
  return x0;
}
__asm__(".text\n.global _start\n_start:\n mov x0, sp\n bl start_c\n brk #0\n");
#define SA_RESTORER_FLAG 0
#else
#error "amd64 or arm64 only"
#endif

#define sys3(n, a, b, c) sys6(n, (i64)(a), (i64)(b), (i64)(c), 0, 0, 0)

/* Compilers may emit calls to these even in freestanding code. */
void *memset(void *d, int c, u64 n) {
  u8 *p = d;
  while (n--) *p++ = (u8)c;
  return d;
}
void *memcpy(void *d, const void *s, u64 n) {
  u8 *p = d;
  const u8 *q = s;
  while (n--) *p++ = *q++;
  return d;
}

static u64 len(const char *s) {
  u64 n = 0;
  while (s[n]) n++;
  return n;
}
static int eq(const char *a, const char *b) {
  while (*a && *a == *b) a++, b++;
  return *a == *b;
}
static int starts(const char *s, const char *prefix) {
  while (*prefix)
    if (*s++ != *prefix++) return 0;
  return 1;
}
static void out(int fd, const char *s, u64 n) {
  while (n) {
    i64 w = sys3(SYS_write, fd, s, n);
    if (w <= 0) return;
    s += w, n -= (u64)w;
  }
}
static void say(int fd, const char *s) { out(fd, s, len(s)); }
static __attribute__((noreturn)) void quit(int code) {
  for (;;) sys3(SYS_exit_group, code, 0, 0);
}
static __attribute__((noreturn)) void fail(const char *what) {
  say(2, "demo: ");
  say(2, what);
  say(2, "\n");
  quit(1);
}
static u32 number(const char *s) {
  u32 n = 0;
  while (*s >= '0' && *s <= '9') n = n * 10 + (u32)(*s++ - '0');
  return n;
}
static char *utoa(u64 v, char *end) {
  *--end = 0;
  do *--end = (char)('0' + v % 10); while (v /= 10);
  return end;
}

/* A string buffer. */
struct buf { char *p; u64 n, cap; };
static void add(struct buf *b, const char *s, u64 n) {
  while (n-- && b->n < b->cap) b->p[b->n++] = *s++;
}
static void adds(struct buf *b, const char *s) { add(b, s, len(s)); }

struct sockaddr_in6 { u16 family, port; u32 flowinfo; u8 addr[16]; u32 scope; };
static u16 be16(u16 v) { return (u16)((v >> 8) | (v << 8)); }

static void on_term(int sig) {
  (void)sig;
  quit(0);
}
static void handle_term(void) {
  struct { void (*handler)(int); u64 flags; void (*restorer)(int); u64 mask; } act = {
    on_term, SA_RESTORER_FLAG, on_term, 0};
  sys6(SYS_rt_sigaction, 15, (i64)&act, 0, 8, 0, 0);
}
static void wait_forever(void) {
  for (;;) sys6(SYS_ppoll, 0, 0, 0, 0, 8, 0);
}

static const char *env(char **envp, const char *name) {
  u64 n = len(name);
  for (; *envp; envp++)
    if (starts(*envp, name) && (*envp)[n] == '=') return *envp + n + 1;
  return 0;
}

static int serve(u32 port, char **envp) {
  const char *greeting = env(envp, "GREETING");
  const char *version = env(envp, "DEMO_VERSION");
  struct { char f[6][65]; } uts;
  if (sys3(SYS_uname, &uts, 0, 0) < 0) uts.f[1][0] = 0;
  char body_[512];
  struct buf body = {body_, 0, sizeof body_};
  adds(&body, greeting ? greeting : "hello from podmin");
  adds(&body, " (image demo:");
  adds(&body, version ? version : "?");
  adds(&body, ", Pod ");
  adds(&body, uts.f[1]);
  adds(&body, ")\n");
  char head_[256], num[24];
  struct buf head = {head_, 0, sizeof head_};
  adds(&head, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: ");
  adds(&head, utoa(body.n, num + sizeof num));
  adds(&head, "\r\n\r\n");
  add(&head, body.p, body.n);

  int fd = (int)sys3(SYS_socket, 10 /* AF_INET6 */, 1 /* SOCK_STREAM */, 0);
  if (fd < 0) fail("socket");
  int one = 1, zero = 0;
  sys6(SYS_setsockopt, fd, 1 /* SOL_SOCKET */, 2 /* SO_REUSEADDR */, (i64)&one, 4, 0);
  sys6(SYS_setsockopt, fd, 41 /* IPPROTO_IPV6 */, 26 /* IPV6_V6ONLY */, (i64)&zero, 4, 0);
  struct sockaddr_in6 sa = {10, be16((u16)port), 0, {0}, 0};
  if (sys3(SYS_bind, fd, &sa, sizeof sa) < 0) fail("bind");
  if (sys3(SYS_listen, fd, 64, 0) < 0) fail("listen");
  char line[96];
  struct buf l = {line, 0, sizeof line};
  adds(&l, "demo: serving HTTP on port ");
  adds(&l, utoa(port, num + sizeof num));
  adds(&l, "\n");
  out(1, l.p, l.n);
  char req[2048];
  for (;;) {
    int c = (int)sys3(SYS_accept, fd, 0, 0);
    if (c < 0) continue;
    sys3(SYS_read, c, req, sizeof req); /* the request line and headers; the answer is the same */
    out(c, head.p, head.n);
    sys3(SYS_close, c, 0, 0);
  }
}

/* Parses an IPv6 address (with one "::"); returns 0 on success. */
static int parse6(const char *s, u8 a[16]) {
  u16 g[8];
  int n = 0, gap = -1;
  if (s[0] == ':' && s[1] == ':') gap = 0, s += 2;
  while (*s && *s != ' ' && *s != '\n' && *s != '\t' && *s != '%') {
    u32 v = 0, digits = 0;
    for (;; s++, digits++) {
      char c = *s;
      u32 d = c >= '0' && c <= '9' ? (u32)(c - '0')
              : c >= 'a' && c <= 'f' ? (u32)(c - 'a' + 10)
              : c >= 'A' && c <= 'F' ? (u32)(c - 'A' + 10) : 99;
      if (d == 99) break;
      v = v * 16 + d;
    }
    if (!digits || digits > 4 || n == 8) return -1;
    g[n++] = (u16)v;
    if (*s == ':') {
      s++;
      if (*s == ':') {
        if (gap >= 0) return -1;
        gap = n, s++;
      }
    }
  }
  if (gap < 0 && n != 8) return -1;
  int fill = 8 - n, k = 0;
  for (int i = 0; i < n; i++) {
    if (i == gap) for (int j = 0; j < fill; j++) a[k++] = 0, a[k++] = 0;
    a[k++] = (u8)(g[i] >> 8), a[k++] = (u8)g[i];
  }
  if (gap == n) for (int j = 0; j < fill; j++) a[k++] = 0, a[k++] = 0;
  return 0;
}

/* Formats an IPv6 address, the longest run of zero groups as "::". */
static void format6(struct buf *b, const u8 a[16]) {
  int best = -1, bestn = 0;
  for (int i = 0; i < 8;) {
    int j = i;
    while (j < 8 && !a[2 * j] && !a[2 * j + 1]) j++;
    if (j - i > bestn && j - i > 1) best = i, bestn = j - i;
    i = j > i ? j : i + 1;
  }
  for (int i = 0; i < 8; i++) {
    if (i == best) {
      adds(b, "::");
      i += bestn - 1;
      continue;
    }
    if (i && i != best + bestn) adds(b, ":");
    u32 v = (u32)(a[2 * i] << 8 | a[2 * i + 1]);
    char h[5];
    int k = 0;
    for (int sh = 12; sh >= 0; sh -= 4) {
      u32 d = (v >> sh) & 15;
      if (d || k || !sh) h[k++] = (char)(d < 10 ? '0' + d : 'a' + d - 10);
    }
    add(b, h, (u64)k);
  }
}

/* The first nameserver and the first search domain of /etc/resolv.conf. */
static void resolv(u8 ns[16], char *search, u64 cap) {
  char text[4096];
  int fd = (int)sys6(SYS_openat, -100 /* AT_FDCWD */, (i64)"/etc/resolv.conf", 0, 0, 0, 0);
  if (fd < 0) fail("cannot open /etc/resolv.conf");
  i64 n = sys3(SYS_read, fd, text, sizeof text - 1);
  sys3(SYS_close, fd, 0, 0);
  text[n > 0 ? n : 0] = 0;
  int have_ns = 0;
  search[0] = 0;
  for (char *line = text; *line;) {
    if (!have_ns && starts(line, "nameserver ") && parse6(line + 11, ns) == 0) have_ns = 1;
    if (!search[0] && starts(line, "search ")) {
      u64 i = 0;
      for (char *s = line + 7; *s && *s != ' ' && *s != '\n' && i + 1 < cap; s++) search[i++] = *s;
      search[i] = 0;
    }
    while (*line && *line != '\n') line++;
    if (*line) line++;
  }
  if (!have_ns) fail("no IPv6 nameserver in /etc/resolv.conf");
}

/* Asks `ns` for the AAAA record of `name`; returns 0 with the address in `addr`. */
static int lookup(const u8 ns[16], const char *name, u8 addr[16]) {
  u8 q[300];
  u64 n = 0;
  u8 header[12] = {0x70, 0x64, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0};
  memcpy(q, header, 12), n = 12;
  for (const char *s = name; *s;) {
    const char *e = s;
    while (*e && *e != '.') e++;
    u64 l = (u64)(e - s);
    if (!l || l > 63 || n + l + 6 > sizeof q) fail("invalid name");
    q[n++] = (u8)l;
    memcpy(q + n, s, l), n += l;
    s = *e ? e + 1 : e;
  }
  q[n++] = 0, q[n++] = 0, q[n++] = 28, q[n++] = 0, q[n++] = 1;
  int fd = (int)sys3(SYS_socket, 10, 2 /* SOCK_DGRAM */, 0);
  struct sockaddr_in6 sa = {10, be16(53), 0, {0}, 0};
  memcpy(sa.addr, ns, 16);
  if (fd < 0 || sys3(SYS_connect, fd, &sa, sizeof sa) < 0) fail("cannot reach the nameserver");
  u8 r[1500];
  i64 got = -1;
  for (int tries = 0; tries < 5 && got < 0; tries++) {
    out(fd, (const char *)q, n);
    struct { int fd; short events, revents; } p = {fd, 1 /* POLLIN */, 0};
    struct { i64 s, ns; } timeout = {1, 0};
    if (sys6(SYS_ppoll, (i64)&p, 1, (i64)&timeout, 0, 8, 0) == 1) {
      got = sys3(SYS_read, fd, r, sizeof r);
    }
  }
  sys3(SYS_close, fd, 0, 0);
  if (got < (i64)n || r[0] != q[0] || r[1] != q[1]) return -1;
  if ((r[3] & 15) != 0) return -2; /* NXDOMAIN, SERVFAIL, … */
  u32 answers = (u32)(r[6] << 8 | r[7]);
  u64 at = n; /* the question is ours, echoed */
  for (u32 i = 0; i < answers; i++) {
    while (at < (u64)got && r[at] && (r[at] & 0xc0) != 0xc0) at += r[at] + 1u;
    at += at < (u64)got && r[at] ? 2 : 1;
    if (at + 10 > (u64)got) return -1;
    u32 type = (u32)(r[at] << 8 | r[at + 1]), rdlen = (u32)(r[at + 8] << 8 | r[at + 9]);
    at += 10;
    if (at + rdlen > (u64)got) return -1;
    if (type == 28 && rdlen == 16) {
      memcpy(addr, r + at, 16);
      return 0;
    }
    at += rdlen;
  }
  return -2;
}

static int get(const char *host, u32 port, const char *path) {
  u8 ns[16], addr[16];
  char search[256], name[300];
  resolv(ns, search, sizeof search);
  struct buf nm = {name, 0, sizeof name - 1};
  adds(&nm, host);
  int dotted = 0;
  for (const char *s = host; *s; s++) dotted |= *s == '.';
  if (!dotted && search[0]) adds(&nm, "."), adds(&nm, search);
  name[nm.n] = 0;
  char line_[512], num[24];
  struct buf line = {line_, 0, sizeof line_};
  int rc = lookup(ns, name, addr);
  if (rc) {
    adds(&line, "demo: ");
    adds(&line, name);
    adds(&line, rc == -2 ? ": no such name (AAAA) at " : ": no answer from ");
    format6(&line, ns);
    adds(&line, "\n");
    out(2, line.p, line.n);
    return 1;
  }
  adds(&line, name);
  adds(&line, " is ");
  format6(&line, addr);
  adds(&line, " (nameserver ");
  format6(&line, ns);
  adds(&line, "); GET http://[");
  format6(&line, addr);
  adds(&line, "]:");
  adds(&line, utoa(port, num + sizeof num));
  adds(&line, path);
  adds(&line, "\n");
  out(2, line.p, line.n);
  int fd = (int)sys3(SYS_socket, 10, 1, 0);
  struct sockaddr_in6 sa = {10, be16((u16)port), 0, {0}, 0};
  memcpy(sa.addr, addr, 16);
  if (fd < 0 || sys3(SYS_connect, fd, &sa, sizeof sa) < 0) fail("connection refused or unreachable");
  char req_[512];
  struct buf req = {req_, 0, sizeof req_};
  adds(&req, "GET ");
  adds(&req, path);
  adds(&req, " HTTP/1.0\r\nHost: ");
  adds(&req, host);
  adds(&req, "\r\nUser-Agent: podmin-demo\r\n\r\n");
  out(fd, req.p, req.n);
  char resp[8192];
  u64 have = 0;
  for (;;) {
    i64 r = sys3(SYS_read, fd, resp + have, sizeof resp - 1 - have);
    if (r <= 0) break;
    have += (u64)r;
    if (have == sizeof resp - 1) break;
  }
  sys3(SYS_close, fd, 0, 0);
  resp[have] = 0;
  char *bodyp = resp;
  while (*bodyp && !starts(bodyp, "\r\n\r\n")) bodyp++;
  if (!*bodyp) fail("no HTTP answer");
  out(1, bodyp + 4, have - (u64)(bodyp + 4 - resp));
  return starts(resp, "HTTP/1.1 2") || starts(resp, "HTTP/1.0 2") ? 0 : 1;
}

__attribute__((used)) void start_c(i64 *sp) {
  int argc = (int)sp[0];
  char **argv = (char **)(sp + 1);
  char **envp = argv + argc + 1;
  handle_term();
  if (argc >= 2 && eq(argv[1], "serve")) serve(argc > 2 ? number(argv[2]) : 8080, envp);
  if (argc >= 3 && eq(argv[1], "get")) {
    quit(get(argv[2], argc > 3 ? number(argv[3]) : 80, argc > 4 ? argv[4] : "/"));
  }
  if (argc >= 2 && eq(argv[1], "sleep")) wait_forever();
  say(2, "usage: /demo serve [PORT] | get NAME [PORT] [PATH] | sleep\n");
  quit(2);
}
