/*
 * Frame sender of the dataplane cost benchmark (tests/bench/dataplane_cost.ts).
 * Run inside a Pod namespace; compiled by the benchmark with the system's cc.
 *
 *   frame_sender send IFNAME DST_MAC SRC DST SERVICES DPORT MODE FLOWS COUNT SECONDS SALT CPU
 *     Sends UDP/IPv6 frames on IFNAME through an AF_PACKET socket (qdisc bypassed), pinned to
 *     CPU. SERVICES = 0: every frame goes to DST; else to DST+1 … DST+SERVICES, spread with a
 *     stride. MODE "new": every frame is a new flow (source address low 32 bits and source port
 *     vary, SALT keeps runs apart). MODE "warm": the FLOWS flows of SALT, one frame each. MODE
 *     "est": COUNT frames cycling over those FLOWS flows. Stops at COUNT frames or SECONDS.
 *     Prints one JSON line: {"sent":N,"wall_ns":W,"cpu_ns":C,"softirqd_ns":S}: wall time, the
 *     thread's own CPU time (which, on a kernel without IRQ time accounting, includes the
 *     softirq work run on its return from each send: the receiving namespaces' whole path), and
 *     the CPU time that CPU's ksoftirqd used meanwhile (work the kernel deferred).
 *
 *   frame_sender reflect IFNAME COUNT SECONDS
 *     Prints "ready", then answers each UDP/IPv6 frame arriving on IFNAME with the same frame
 *     back, addresses, ports and MACs swapped (a reply of exactly the translated flow), until
 *     COUNT answered or SECONDS passed; prints {"reflected":N}. It sees frames before the
 *     interface's ingress hooks, so a drop there does not hide them.
 *
 *   frame_sender ct-flush
 *     Flushes the conntrack table of the current network namespace (ctnetlink).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <linux/netlink.h>
#include <net/if.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define FRAME_LEN (14 + 40 + 8 + 16)
#define BATCH 64

static void die(const char *what)
{
	fprintf(stderr, "frame_sender: %s: %s\n", what, strerror(errno));
	exit(1);
}

static uint64_t now_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* CPU time of ksoftirqd/cpu in ns (its schedstat), 0 when not found. */
static uint64_t softirqd_ns(int cpu)
{
	static char path[300];
	char want[32], buf[300];
	FILE *f;

	if (!path[0]) {
		DIR *d = opendir("/proc");
		struct dirent *e;

		snprintf(want, sizeof(want), "ksoftirqd/%d\n", cpu);
		while (d && (e = readdir(d))) {
			char comm[300];

			if (e->d_name[0] < '0' || e->d_name[0] > '9')
				continue;
			snprintf(comm, sizeof(comm), "/proc/%s/comm", e->d_name);
			f = fopen(comm, "r");
			if (!f)
				continue;
			if (fgets(buf, sizeof(buf), f) && !strcmp(buf, want))
				snprintf(path, sizeof(path), "/proc/%s/schedstat", e->d_name);
			fclose(f);
			if (path[0])
				break;
		}
		if (d)
			closedir(d);
		if (!path[0])
			return 0;
	}
	f = fopen(path, "r");
	if (!f)
		return 0;
	unsigned long long ns = 0;
	if (fscanf(f, "%llu", &ns) != 1)
		ns = 0;
	fclose(f);
	return ns;
}

static uint32_t csum_add(uint32_t sum, const uint8_t *p, size_t len)
{
	for (size_t i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)p[i] << 8 | p[i + 1];
	if (len & 1)
		sum += (uint32_t)p[len - 1] << 8;
	return sum;
}

/* Writes one Ethernet + IPv6 + UDP frame (UDP checksum filled in). */
static void frame(uint8_t *f, const uint8_t dmac[6], const struct in6_addr *src,
		  const struct in6_addr *dst, uint16_t sport, uint16_t dport)
{
	static const uint8_t smac[6] = { 2, 0, 0, 0, 0, 1 };
	const uint16_t udp_len = 8 + 16;
	uint8_t *ip = f + 14, *udp = ip + 40;
	uint32_t sum = 0;

	memcpy(f, dmac, 6);
	memcpy(f + 6, smac, 6);
	f[12] = 0x86;
	f[13] = 0xdd;
	memset(ip, 0, 40);
	ip[0] = 0x60;
	ip[4] = udp_len >> 8;
	ip[5] = udp_len & 0xff;
	ip[6] = IPPROTO_UDP;
	ip[7] = 64;
	memcpy(ip + 8, src, 16);
	memcpy(ip + 24, dst, 16);
	udp[0] = sport >> 8;
	udp[1] = sport & 0xff;
	udp[2] = dport >> 8;
	udp[3] = dport & 0xff;
	udp[4] = udp_len >> 8;
	udp[5] = udp_len & 0xff;
	udp[6] = udp[7] = 0;
	memcpy(udp + 8, "podmin-dp-bench!", 16);
	sum = csum_add(sum, ip + 8, 32);
	sum += udp_len + IPPROTO_UDP;
	sum = csum_add(sum, udp, udp_len);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	uint16_t c = ~sum & 0xffff;
	if (!c)
		c = 0xffff;
	udp[6] = c >> 8;
	udp[7] = c & 0xff;
}

static void set_low32(struct in6_addr *a, uint32_t v)
{
	a->s6_addr[12] = v >> 24;
	a->s6_addr[13] = v >> 16;
	a->s6_addr[14] = v >> 8;
	a->s6_addr[15] = v;
}

static uint32_t low32(const struct in6_addr *a)
{
	return (uint32_t)a->s6_addr[12] << 24 | (uint32_t)a->s6_addr[13] << 16 |
	       (uint32_t)a->s6_addr[14] << 8 | a->s6_addr[15];
}

/* Sends frames [from, to) in batches; stops early past `deadline` (0: never). */
static size_t send_frames(int fd, uint8_t *frames, size_t from, size_t to, uint64_t deadline)
{
	struct mmsghdr msgs[BATCH];
	struct iovec iov[BATCH];
	size_t i = from;

	while (i < to) {
		unsigned n = to - i < BATCH ? (unsigned)(to - i) : BATCH;

		for (unsigned k = 0; k < n; k++) {
			iov[k].iov_base = frames + (i + k) * FRAME_LEN;
			iov[k].iov_len = FRAME_LEN;
			memset(&msgs[k].msg_hdr, 0, sizeof(msgs[k].msg_hdr));
			msgs[k].msg_hdr.msg_iov = &iov[k];
			msgs[k].msg_hdr.msg_iovlen = 1;
		}
		int sent = sendmmsg(fd, msgs, n, 0);
		if (sent < 0) {
			if (errno == ENOBUFS || errno == EAGAIN)
				continue;
			die("sendmmsg");
		}
		i += (size_t)sent;
		if (deadline && now_ns(CLOCK_MONOTONIC) >= deadline)
			break;
	}
	return i - from;
}

static int cmd_send(int argc, char **argv)
{
	if (argc != 14) {
		fprintf(stderr, "usage: frame_sender send IFNAME DST_MAC SRC DST SERVICES DPORT "
				"new|warm|est FLOWS COUNT SECONDS SALT CPU\n");
		return 2;
	}
	const char *ifname = argv[2];
	uint8_t dmac[6];
	struct in6_addr src, dst;
	unsigned services = (unsigned)strtoul(argv[6], NULL, 10);
	uint16_t dport = (uint16_t)strtoul(argv[7], NULL, 10);
	int warm_only = !strcmp(argv[8], "warm");
	int est = warm_only || !strcmp(argv[8], "est");
	size_t flows = strtoul(argv[9], NULL, 10);
	size_t count = strtoul(argv[10], NULL, 10);
	double seconds = strtod(argv[11], NULL);
	uint32_t salt = (uint32_t)strtoul(argv[12], NULL, 10) & 0xffff;
	int cpu = atoi(argv[13]);

	if (sscanf(argv[3], "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx", &dmac[0], &dmac[1], &dmac[2],
		   &dmac[3], &dmac[4], &dmac[5]) != 6 ||
	    inet_pton(AF_INET6, argv[4], &src) != 1 || inet_pton(AF_INET6, argv[5], &dst) != 1 ||
	    !count || (est && !flows) || (!est && strcmp(argv[8], "new"))) {
		fprintf(stderr, "frame_sender: bad arguments\n");
		return 2;
	}
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		die("sched_setaffinity");

	size_t total = warm_only ? flows : count;
	uint8_t *frames = malloc(total * FRAME_LEN);
	if (!frames)
		die("malloc");
	uint32_t dst0 = low32(&dst);
	for (size_t i = 0; i < total; i++) {
		size_t flow = est ? i % flows : i;
		struct in6_addr s = src, d = dst;
		uint16_t sport = 1024 + flow % 60000;

		set_low32(&s, est ? salt << 16 | 0xffff : salt << 16 | (uint32_t)(flow / 60000));
		if (services)
			set_low32(&d, dst0 + 1 + (uint32_t)((flow * 7919) % services));
		frame(frames + i * FRAME_LEN, dmac, &s, &d, sport, dport);
	}

	int fd = socket(AF_PACKET, SOCK_RAW, 0);
	if (fd < 0)
		die("socket(AF_PACKET)");
	int one = 1;
	if (setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one)))
		die("PACKET_QDISC_BYPASS");
	struct sockaddr_ll ll = { .sll_family = AF_PACKET, .sll_protocol = 0 };
	ll.sll_ifindex = (int)if_nametoindex(ifname);
	if (!ll.sll_ifindex)
		die(ifname);
	if (bind(fd, (struct sockaddr *)&ll, sizeof(ll)))
		die("bind");

	uint64_t w0 = now_ns(CLOCK_MONOTONIC), c0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
	uint64_t k0 = softirqd_ns(cpu);
	size_t sent = send_frames(fd, frames, 0, total,
				  warm_only ? 0 : w0 + (uint64_t)(seconds * 1e9));
	uint64_t w1 = now_ns(CLOCK_MONOTONIC), c1 = now_ns(CLOCK_THREAD_CPUTIME_ID);
	uint64_t k1 = softirqd_ns(cpu);
	printf("{\"sent\":%zu,\"wall_ns\":%llu,\"cpu_ns\":%llu,\"softirqd_ns\":%llu}\n", sent,
	       (unsigned long long)(w1 - w0), (unsigned long long)(c1 - c0),
	       (unsigned long long)(k1 - k0));
	close(fd);
	free(frames);
	return 0;
}

static int cmd_reflect(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: frame_sender reflect IFNAME COUNT SECONDS\n");
		return 2;
	}
	size_t want = strtoul(argv[3], NULL, 10), done = 0;
	uint64_t deadline = now_ns(CLOCK_MONOTONIC) + (uint64_t)(strtod(argv[4], NULL) * 1e9);
	int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
	if (fd < 0)
		die("socket(AF_PACKET)");
	struct sockaddr_ll ll = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL) };
	ll.sll_ifindex = (int)if_nametoindex(argv[2]);
	if (!ll.sll_ifindex)
		die(argv[2]);
	if (bind(fd, (struct sockaddr *)&ll, sizeof(ll)))
		die("bind");
	int rcvbuf = 64 << 20; /* a whole burst of warm-up frames waits here */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)))
		die("SO_RCVBUFFORCE");
	struct timeval tv = { .tv_sec = 0, .tv_usec = 100000 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	printf("ready\n");
	fflush(stdout);
	uint8_t f[2048], tmp[16];
	while (done < want && now_ns(CLOCK_MONOTONIC) < deadline) {
		struct sockaddr_ll from;
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(fd, f, sizeof(f), 0, (struct sockaddr *)&from, &fl);
		if (n < 0)
			continue;
		if (from.sll_pkttype == PACKET_OUTGOING || n < 14 + 40 + 8 || f[12] != 0x86 || f[13] != 0xdd ||
		    f[14 + 6] != IPPROTO_UDP)
			continue;
		memcpy(tmp, f, 6); /* MACs */
		memcpy(f, f + 6, 6);
		memcpy(f + 6, tmp, 6);
		memcpy(tmp, f + 22, 16); /* addresses */
		memcpy(f + 22, f + 38, 16);
		memcpy(f + 38, tmp, 16);
		memcpy(tmp, f + 54, 2); /* ports (the checksum is symmetric in both swaps) */
		memcpy(f + 54, f + 56, 2);
		memcpy(f + 56, tmp, 2);
		if (sendto(fd, f, (size_t)n, 0, (struct sockaddr *)&from, fl) < 0)
			die("sendto");
		done++;
	}
	printf("{\"reflected\":%zu}\n", done);
	return 0;
}

static int cmd_ct_flush(void)
{
	struct {
		struct nlmsghdr nh;
		struct nfgenmsg nf;
	} req = { 0 };
	char buf[4096];
	int fd = socket(AF_NETLINK, SOCK_RAW, NETLINK_NETFILTER);

	if (fd < 0)
		die("socket(NETLINK_NETFILTER)");
	req.nh.nlmsg_len = sizeof(req);
	req.nh.nlmsg_type = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_DELETE;
	req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	req.nf.nfgen_family = AF_UNSPEC;
	req.nf.version = NFNETLINK_V0;
	if (send(fd, &req, sizeof(req), 0) < 0)
		die("send(ctnetlink flush)");
	ssize_t n = recv(fd, buf, sizeof(buf), 0);
	if (n < (ssize_t)sizeof(struct nlmsghdr))
		die("recv(ctnetlink flush)");
	struct nlmsghdr *nh = (struct nlmsghdr *)buf;
	if (nh->nlmsg_type == NLMSG_ERROR) {
		struct nlmsgerr *e = NLMSG_DATA(nh);
		if (e->error) {
			errno = -e->error;
			die("conntrack flush");
		}
	}
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "send"))
		return cmd_send(argc, argv);
	if (argc >= 2 && !strcmp(argv[1], "reflect"))
		return cmd_reflect(argc, argv);
	if (argc == 2 && !strcmp(argv[1], "ct-flush"))
		return cmd_ct_flush();
	fprintf(stderr, "usage: frame_sender send … | reflect … | ct-flush\n");
	return 2;
}
