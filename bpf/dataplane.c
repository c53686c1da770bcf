// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Podmin's IPv6 TCP/UDP Service dataplane: two tc (clsact) programs for
 * packets of Pods and interfaces, three cgroup socket programs for
 * connections the node's own (host network) processes open.
 *
 * podmin_ingress (tc ingress of Pod veths, the Pod ENI and the default-route
 * interface), before routing:
 *   1. TCP/UDP packet whose tuple is in podmin_ct: rewritten to the stored
 *      tuple (forward: client -> backend; reply: backend -> client, source
 *      rewritten back to VIP:port).
 *   2. TCP/UDP packet to a Service port in podmin_svc: a backend is chosen
 *      by a hash of the tuple, a forward and a reply entry are created, the
 *      packet is rewritten. Hairpin (the client is the chosen backend): the
 *      source becomes the VIP so the reply leaves the Pod and comes back here.
 *      A reply tuple already owned by another flow gets a new source port.
 *      A Service port without ready backends: refused with an ICMPv6 Port
 *      Unreachable from the VIP, sent back out of the same interface (reject()).
 *   3. ICMPv6 error (types 1-4) quoting a translated packet: the quoted packet
 *      and the outer addresses are translated back.
 *   4. Anything else to the service CIDR (unknown port or protocol, ICMPv6
 *      echo, fragments, routing header, AH, ESP): dropped.
 *   5. Everything else: passed untouched (TC_ACT_UNSPEC).
 * podmin_egress (tc egress of the same interfaces): translates ICMPv6 errors
 * the node itself generates about translated packets (e.g. Packet Too Big on
 * the way to a backend), when that does not change the outer destination.
 *
 * podmin_connect6 (cgroup/connect6), podmin_sendmsg6 (cgroup/sendmsg6),
 * podmin_recvmsg6 (cgroup/recvmsg6), attached to the root cgroup v2: a
 * socket of the agent's network namespace (podmin_sock_cfg) that connects
 * (TCP, UDP) or sends an unconnected datagram (UDP) to a Service port gets
 * the destination rewritten to a backend before any packet exists, so no
 * per-packet work follows. UDP sockets remember (socket cookie, backend) ->
 * VIP:port in podmin_sock, and recvmsg rewrites a reply's source back to the
 * VIP:port. No ready backend: the call fails with ECONNREFUSED.
 *
 * Checksums are updated incrementally. Address (pseudo-header) changes use
 * BPF_F_PSEUDO_HDR, except for CHECKSUM_COMPLETE packets (detected with
 * bpf_csum_update(skb, 0)): there the address change and the checksum
 * change cancel out in skb->csum, so the update must not touch skb->csum.
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_ether.h>
#include <linux/ipv6.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "dataplane.h"

#define IP6_OFF ETH_HLEN
#define MAX_EXT_HEADERS 4
#define PASS TC_ACT_UNSPEC
#define DROP TC_ACT_SHOT
#define NOT_HANDLED 1000
#define REFUSE 1001
#define REMAP_TRIES 4
#define REMAP_LOW 1024
#define REMAP_SPAN (32768 - 1024)

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pm_cfg);
} podmin_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct pm_svc_key);
	__type(value, struct pm_svc_val);
} podmin_svc SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 262144);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct pm_be_key);
	__type(value, struct pm_be_val);
} podmin_be SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 131072);
	__type(key, struct pm_ct_key);
	__type(value, struct pm_ct_val);
} podmin_ct SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PM_STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} podmin_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pm_sock_cfg);
} podmin_sock_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct pm_sock_key);
	__type(value, struct pm_sock_val);
} podmin_sock SEC(".maps");

/* Where the L4 header is and whether the packet may be rewritten. */
struct l4info {
	__u32 off;
	__u8 proto;
	__u8 untranslatable;
};

/*
 * Reads packet bytes: directly from the linear data when they are there
 * (the common case, no helper call), through bpf_skb_load_bytes otherwise.
 */
static __always_inline int load(struct __sk_buff *skb, __u32 off, void *to, const __u32 len)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;

	if (off < 0x8000 && data + off + len <= data_end) {
		__builtin_memcpy(to, data + off, len);
		return 0;
	}
	return bpf_skb_load_bytes(skb, off, to, len);
}

static __always_inline void count(__u32 idx)
{
	__u64 *c = bpf_map_lookup_elem(&podmin_stats, &idx);

	if (c)
		*c += 1;
}

static __always_inline int addr_eq(const struct in6_addr *a, const struct in6_addr *b)
{
	return a->in6_u.u6_addr32[0] == b->in6_u.u6_addr32[0] &&
	       a->in6_u.u6_addr32[1] == b->in6_u.u6_addr32[1] &&
	       a->in6_u.u6_addr32[2] == b->in6_u.u6_addr32[2] &&
	       a->in6_u.u6_addr32[3] == b->in6_u.u6_addr32[3];
}

static __always_inline int ct_val_eq(const struct pm_ct_val *a, const struct pm_ct_val *b)
{
	return addr_eq(&a->saddr, &b->saddr) && addr_eq(&a->daddr, &b->daddr) &&
	       a->sport == b->sport && a->dport == b->dport && a->dir == b->dir;
}

static __always_inline __u32 mix32(__u32 h)
{
	h ^= h >> 16;
	h *= 0x85ebca6b;
	h ^= h >> 13;
	h *= 0xc2b2ae35;
	h ^= h >> 16;
	return h;
}

/* Deterministic, so a flow whose entry was evicted returns to the same slot. */
static __always_inline __u32 tuple_hash(const struct pm_ct_key *k)
{
	__u32 h = mix32(((__u32)k->sport << 16 | k->dport) ^ k->proto);

	h = mix32(h ^ k->saddr.in6_u.u6_addr32[0]);
	h = mix32(h ^ k->saddr.in6_u.u6_addr32[1]);
	h = mix32(h ^ k->saddr.in6_u.u6_addr32[2]);
	h = mix32(h ^ k->saddr.in6_u.u6_addr32[3]);
	return h;
}

/*
 * Walks the IPv6 extension headers after the fixed header at `off`.
 * Hop-by-hop and destination options are skipped; a routing header, AH,
 * ESP, a fragment header or more than MAX_EXT_HEADERS headers make the
 * packet untranslatable.
 */
static __always_inline int skip_ext(struct __sk_buff *skb, __u32 off, __u8 nh, struct l4info *out)
{
	out->untranslatable = 0;
#pragma unroll
	for (int i = 0; i < MAX_EXT_HEADERS; i++) {
		__u8 h[2];

		if (nh != IPPROTO_HOPOPTS && nh != IPPROTO_DSTOPTS && nh != IPPROTO_ROUTING &&
		    nh != IPPROTO_AH)
			break;
		if (load(skb, off, h, 2))
			return -1;
		if (nh == IPPROTO_ROUTING || nh == IPPROTO_AH)
			out->untranslatable = 1;
		off += nh == IPPROTO_AH ? ((__u32)h[1] + 2) * 4 : ((__u32)h[1] + 1) * 8;
		nh = h[0];
	}
	if (nh == IPPROTO_HOPOPTS || nh == IPPROTO_DSTOPTS || nh == IPPROTO_ROUTING ||
	    nh == IPPROTO_AH || nh == IPPROTO_FRAGMENT || nh == IPPROTO_ESP)
		out->untranslatable = 1;
	out->off = off;
	out->proto = nh;
	return 0;
}

/* BPF_F_PSEUDO_HDR unless the packet carries a CHECKSUM_COMPLETE sum. */
static __always_inline __u64 pseudo_flag(struct __sk_buff *skb)
{
	return bpf_csum_update(skb, 0) < 0 ? BPF_F_PSEUDO_HDR : 0;
}

/* Replaces a 16-byte address at `off` covered by the checksum at `csum_off`. */
static __always_inline int replace_addr(struct __sk_buff *skb, __u32 off, struct in6_addr *old,
					struct in6_addr *new, __u32 csum_off, __u64 flags)
{
	__s64 diff;

	if (addr_eq(old, new))
		return 0;
	diff = bpf_csum_diff((__be32 *)old, 16, (__be32 *)new, 16, 0);
	if (diff < 0)
		return -1;
	if (bpf_l4_csum_replace(skb, csum_off, 0, diff, flags))
		return -1;
	return bpf_skb_store_bytes(skb, off, new, 16, 0) ? -1 : 0;
}

/*
 * Rewrites a TCP/UDP packet from tuple `from` to tuple `to` (both laid out
 * saddr, daddr, sport, dport as in the packet): one checksum update for the
 * addresses (pseudo-header), one for the ports, then the bytes.
 */
static __always_inline int rewrite(struct __sk_buff *skb, const struct l4info *l4,
				   struct pm_ct_key *from, struct pm_ct_val *to)
{
	__u32 csum_off = l4->off + (l4->proto == IPPROTO_TCP ? 16 : 6);
	__u64 mangle = l4->proto == IPPROTO_UDP ? BPF_F_MARK_MANGLED_0 : 0;
	__be32 old_ports = *(__be32 *)&from->sport;
	__be32 new_ports = *(__be32 *)&to->sport;
	int addrs = !addr_eq(&from->saddr, &to->saddr) || !addr_eq(&from->daddr, &to->daddr);
	void *data, *data_end;
	__u32 off = l4->off;

	if (addrs) {
		__s64 diff = bpf_csum_diff((__be32 *)&from->saddr, 32, (__be32 *)&to->saddr, 32, 0);

		if (diff < 0)
			return -1;
		if (bpf_l4_csum_replace(skb, csum_off, 0, diff, pseudo_flag(skb) | mangle))
			return -1;
	}
	if (old_ports != new_ports &&
	    bpf_l4_csum_replace(skb, csum_off, old_ports, new_ports, mangle | sizeof(new_ports)))
		return -1;

	/* The checksum updates made the headers writable and linear up to csum_off. */
	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;
	if (off < 0x8000 && data + IP6_OFF + sizeof(struct ipv6hdr) <= data_end &&
	    data + off + sizeof(new_ports) <= data_end) {
		if (addrs)
			__builtin_memcpy(data + IP6_OFF + offsetof(struct ipv6hdr, saddr), &to->saddr, 32);
		__builtin_memcpy(data + off, &new_ports, sizeof(new_ports));
		return 0;
	}
	if (addrs &&
	    bpf_skb_store_bytes(skb, IP6_OFF + offsetof(struct ipv6hdr, saddr), &to->saddr, 32, 0))
		return -1;
	return bpf_skb_store_bytes(skb, off, &new_ports, sizeof(new_ports), 0) ? -1 : 0;
}

/* Inserts the reply entry unless another flow owns its tuple. 0 on success. */
static __always_inline int claim_reply(struct pm_ct_key *rk, struct pm_ct_val *rv)
{
	struct pm_ct_val *cur;

	if (!bpf_map_update_elem(&podmin_ct, rk, rv, BPF_NOEXIST))
		return 0;
	cur = bpf_map_lookup_elem(&podmin_ct, rk);
	if (cur)
		return ct_val_eq(cur, rv) ? 0 : -1;
	return bpf_map_update_elem(&podmin_ct, rk, rv, BPF_ANY) ? -1 : 0;
}

/*
 * The reply that refuses a packet to a Service port without ready backends: an ICMPv6
 * Destination Unreachable, Port Unreachable (type 1, code 4) from the VIP, quoting the first
 * 48 bytes of the packet (its IPv6 header and the L4 ports and TCP sequence), sent back out of
 * the interface the packet came in on. A TCP connect() fails at once with ECONNREFUSED and a
 * connected UDP socket reads ECONNREFUSED, as with kube-proxy's REJECT, instead of waiting for
 * a timeout (no black hole).
 */
#define REJECT_QUOTE 48
#define REJECT_LEN (ETH_HLEN + 40 + 8 + REJECT_QUOTE)

struct reject_sum {
	/* The ICMPv6 pseudo-header (RFC 8200 section 8.1). */
	struct in6_addr src;
	struct in6_addr dst;
	__be32 len;
	__be32 nh;
	/* The ICMPv6 message. */
	__u8 type;
	__u8 code;
	__be16 check;
	__be32 unused;
	__u8 quote[REJECT_QUOTE];
};

static __noinline int reject(struct __sk_buff *skb)
{
	struct reject_sum m = {};
	struct ethhdr eth;
	struct ipv6hdr ip6 = {};
	__u8 mac[ETH_ALEN];
	__s64 sum;

	if (load(skb, 0, &eth, sizeof(eth)) || load(skb, IP6_OFF, m.quote, REJECT_QUOTE))
		return DROP;
	__builtin_memcpy(&m.dst, m.quote + offsetof(struct ipv6hdr, saddr), 16);
	__builtin_memcpy(&m.src, m.quote + offsetof(struct ipv6hdr, daddr), 16);
	m.len = bpf_htonl(8 + REJECT_QUOTE);
	m.nh = bpf_htonl(IPPROTO_ICMPV6);
	m.type = 1; /* Destination Unreachable */
	m.code = 4; /* Port Unreachable */
	sum = bpf_csum_diff(0, 0, (__be32 *)&m, sizeof(m), 0);
	if (sum < 0)
		return DROP;
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	m.check = ~(__u16)sum;

	__builtin_memcpy(mac, eth.h_dest, ETH_ALEN);
	__builtin_memcpy(eth.h_dest, eth.h_source, ETH_ALEN);
	__builtin_memcpy(eth.h_source, mac, ETH_ALEN);
	ip6.version = 6;
	ip6.payload_len = bpf_htons(8 + REJECT_QUOTE);
	ip6.nexthdr = IPPROTO_ICMPV6;
	ip6.hop_limit = 64;
	ip6.saddr = m.src;
	ip6.daddr = m.dst;

	if (bpf_skb_change_tail(skb, REJECT_LEN, 0) ||
	    bpf_skb_store_bytes(skb, 0, &eth, sizeof(eth), 0) ||
	    bpf_skb_store_bytes(skb, IP6_OFF, &ip6, sizeof(ip6), 0) ||
	    bpf_skb_store_bytes(skb, IP6_OFF + sizeof(ip6), &m.type, 8 + REJECT_QUOTE, 0)) {
		count(PM_STAT_ERROR);
		return DROP;
	}
	return bpf_redirect(skb->ifindex, 0);
}

/* TCP/UDP: conntrack, then Service ports. */
static __noinline int l4_nat(struct __sk_buff *skb, struct ipv6hdr *ip6, struct l4info *l4)
{
	struct pm_ct_key key = {};
	struct pm_ct_val *entry, to;
	struct pm_svc_key sk = {};
	struct pm_svc_val *svc;
	struct pm_be_key bk;
	struct pm_be_val *be;
	struct pm_ct_key rk = {};
	struct pm_ct_val rv = {};
	__be16 ports[2];
	__u32 n;

	if (load(skb, l4->off, ports, sizeof(ports)))
		return NOT_HANDLED;
	key.saddr = ip6->saddr;
	key.daddr = ip6->daddr;
	key.sport = ports[0];
	key.dport = ports[1];
	key.proto = l4->proto;

	entry = bpf_map_lookup_elem(&podmin_ct, &key);
	if (entry) {
		to = *entry;
		count(to.dir == PM_DIR_REPLY ? PM_STAT_REPLY : PM_STAT_FORWARD);
		if (rewrite(skb, l4, &key, &to)) {
			count(PM_STAT_ERROR);
			return DROP;
		}
		return PASS;
	}

	sk.vip = key.daddr;
	sk.port = key.dport;
	sk.proto = key.proto;
	svc = bpf_map_lookup_elem(&podmin_svc, &sk);
	if (!svc)
		return NOT_HANDLED;
	n = svc->count;
	if (!n) {
		count(PM_STAT_DROP_NO_BACKEND);
		return REFUSE; /* answered by handle(), outside this frame's stack */
	}
	bk.id = svc->id;
	bk.slot = tuple_hash(&key) % n;
	be = bpf_map_lookup_elem(&podmin_be, &bk);
	if (!be) {
		count(PM_STAT_DROP_NO_BACKEND);
		return DROP;
	}

	to.saddr = addr_eq(&key.saddr, &be->addr) ? key.daddr : key.saddr;
	to.daddr = be->addr;
	to.sport = key.sport;
	to.dport = be->port;
	to.dir = PM_DIR_FORWARD;
	to.pad[0] = to.pad[1] = to.pad[2] = 0;

	rk.saddr = to.daddr;
	rk.daddr = to.saddr;
	rk.sport = to.dport;
	rk.dport = to.sport;
	rk.proto = key.proto;
	rv.saddr = key.daddr;
	rv.daddr = key.saddr;
	rv.sport = key.dport;
	rv.dport = key.sport;
	rv.dir = PM_DIR_REPLY;

	if (claim_reply(&rk, &rv)) {
		int claimed = 0;

#pragma unroll
		for (int i = 0; i < REMAP_TRIES; i++) {
			rk.dport = bpf_htons(REMAP_LOW + bpf_get_prandom_u32() % REMAP_SPAN);
			if (!claim_reply(&rk, &rv)) {
				claimed = 1;
				break;
			}
		}
		if (!claimed) {
			count(PM_STAT_DROP_CT);
			return DROP;
		}
		to.sport = rk.dport;
		count(PM_STAT_PORT_REMAP);
	}
	if (bpf_map_update_elem(&podmin_ct, &key, &to, BPF_ANY)) {
		bpf_map_delete_elem(&podmin_ct, &rk);
		count(PM_STAT_DROP_CT);
		return DROP;
	}
	count(PM_STAT_NEW_FLOW);
	if (rewrite(skb, l4, &key, &to)) {
		count(PM_STAT_ERROR);
		return DROP;
	}
	return PASS;
}

/*
 * Replaces data inside an ICMPv6 error's quoted packet: the quoted L4
 * checksum (when quoted) and the ICMPv6 checksum are updated for the change.
 */
static __always_inline int quoted_replace(struct __sk_buff *skb, __u32 off, void *old, void *new,
					  __u32 len, __u32 icmp_csum, __u32 inner_csum,
					  __u64 inner_flags)
{
	__s64 diff = bpf_csum_diff(old, len, new, len, 0);
	__sum16 before, after;

	if (diff < 0)
		return -1;
	if (inner_csum) {
		if (load(skb, inner_csum, &before, sizeof(before)))
			return -1;
		if (bpf_l4_csum_replace(skb, inner_csum, 0, diff, inner_flags))
			return -1;
		if (load(skb, inner_csum, &after, sizeof(after)))
			return -1;
		if (bpf_l4_csum_replace(skb, icmp_csum, before, after, sizeof(after)))
			return -1;
	}
	if (bpf_l4_csum_replace(skb, icmp_csum, 0, diff, 0))
		return -1;
	return bpf_skb_store_bytes(skb, off, new, len, 0) ? -1 : 0;
}

/*
 * ICMPv6 error about a translated packet. The quoted packet Q went out
 * rewritten; the conntrack entry for Q's reverse tuple holds the tuple that
 * answers Q's original, so the original quoted tuple is that entry swapped.
 */
static __noinline int icmp_error(struct __sk_buff *skb, struct ipv6hdr *ip6, __u32 l4off,
				 int ingress)
{
	struct ipv6hdr in;
	struct l4info il4;
	struct pm_ct_key k = {};
	struct pm_ct_val *entry, v;
	struct in6_addr osrc, odst, nsrc, ndst;
	__be16 ports[2], nport;
	__u32 i3 = l4off + 8, icsum = l4off + 2, qcsum = 0;
	__u64 qflags, pseudo;
	__u8 type;

	if (load(skb, l4off, &type, 1))
		return NOT_HANDLED;
	if (type < 1 || type > 4)
		return NOT_HANDLED;
	if (load(skb, i3, &in, sizeof(in)) || in.version != 6)
		return NOT_HANDLED;
	if (skip_ext(skb, i3 + sizeof(in), in.nexthdr, &il4) || il4.untranslatable)
		return NOT_HANDLED;
	if (il4.proto != IPPROTO_TCP && il4.proto != IPPROTO_UDP)
		return NOT_HANDLED;
	if (load(skb, il4.off, ports, sizeof(ports)))
		return NOT_HANDLED;

	k.saddr = in.daddr;
	k.daddr = in.saddr;
	k.sport = ports[1];
	k.dport = ports[0];
	k.proto = il4.proto;
	entry = bpf_map_lookup_elem(&podmin_ct, &k);
	if (!entry)
		return NOT_HANDLED;
	v = *entry;

	osrc = ip6->saddr;
	odst = ip6->daddr;
	ndst = addr_eq(&odst, &in.saddr) ? v.daddr : odst;
	nsrc = addr_eq(&osrc, &in.daddr) ? v.saddr : osrc;
	if (!ingress && !addr_eq(&ndst, &odst))
		return NOT_HANDLED;

	if (il4.off + (il4.proto == IPPROTO_TCP ? 18 : 8) <= skb->len)
		qcsum = il4.off + (il4.proto == IPPROTO_TCP ? 16 : 6);
	qflags = il4.proto == IPPROTO_UDP ? BPF_F_MARK_MANGLED_0 : 0;

	if (!addr_eq(&in.saddr, &v.daddr) &&
	    quoted_replace(skb, i3 + offsetof(struct ipv6hdr, saddr), &in.saddr, &v.daddr, 16,
			   icsum, qcsum, qflags))
		goto err;
	if (!addr_eq(&in.daddr, &v.saddr) &&
	    quoted_replace(skb, i3 + offsetof(struct ipv6hdr, daddr), &in.daddr, &v.saddr, 16,
			   icsum, qcsum, qflags))
		goto err;
	if (ports[0] != v.dport) {
		nport = v.dport;
		if (quoted_replace(skb, il4.off, &ports[0], &nport, 2, icsum, qcsum, qflags))
			goto err;
	}
	if (ports[1] != v.sport) {
		nport = v.sport;
		if (quoted_replace(skb, il4.off + 2, &ports[1], &nport, 2, icsum, qcsum, qflags))
			goto err;
	}
	pseudo = pseudo_flag(skb);
	if (replace_addr(skb, IP6_OFF + offsetof(struct ipv6hdr, saddr), &osrc, &nsrc, icsum, pseudo))
		goto err;
	if (replace_addr(skb, IP6_OFF + offsetof(struct ipv6hdr, daddr), &odst, &ndst, icsum, pseudo))
		goto err;
	count(PM_STAT_ICMP);
	return PASS;
err:
	count(PM_STAT_ERROR);
	return DROP;
}

static __always_inline int to_service_cidr(struct in6_addr *a)
{
	__u32 zero = 0;
	struct pm_cfg *c = bpf_map_lookup_elem(&podmin_cfg, &zero);

	if (!c || !(c->flags & PM_CFG_SERVICE_CIDR))
		return 0;
#pragma unroll
	for (int i = 0; i < 4; i++)
		if ((a->in6_u.u6_addr32[i] & c->svc_mask.in6_u.u6_addr32[i]) !=
		    c->svc_net.in6_u.u6_addr32[i])
			return 0;
	return 1;
}

static __always_inline int handle(struct __sk_buff *skb, int ingress)
{
	struct ipv6hdr ip6;
	struct l4info l4;
	__be16 h_proto;
	int verdict;

	if (load(skb, offsetof(struct ethhdr, h_proto), &h_proto, sizeof(h_proto)))
		return PASS;
	if (h_proto != bpf_htons(ETH_P_IPV6))
		return PASS;
	if (load(skb, IP6_OFF, &ip6, sizeof(ip6)) || ip6.version != 6)
		return PASS;
	if (skip_ext(skb, IP6_OFF + sizeof(ip6), ip6.nexthdr, &l4))
		return PASS;

	if (!l4.untranslatable) {
		verdict = NOT_HANDLED;
		if (l4.proto == IPPROTO_ICMPV6)
			verdict = icmp_error(skb, &ip6, l4.off, ingress);
		else if (ingress && (l4.proto == IPPROTO_TCP || l4.proto == IPPROTO_UDP))
			verdict = l4_nat(skb, &ip6, &l4);
		if (verdict == REFUSE)
			return reject(skb);
		if (verdict != NOT_HANDLED)
			return verdict;
	}
	if (ingress && to_service_cidr(&ip6.daddr)) {
		count(l4.untranslatable ? PM_STAT_DROP_UNTRANSLATABLE : PM_STAT_DROP_UNMATCHED);
		return DROP;
	}
	return PASS;
}

SEC("tc")
int podmin_ingress(struct __sk_buff *skb)
{
	return handle(skb, 1);
}

SEC("tc")
int podmin_egress(struct __sk_buff *skb)
{
	return handle(skb, 0);
}


/*
 * Socket programs (cgroup sock_addr). user_ip6 and user_port hold the
 * destination (connect, sendmsg) or a datagram's source (recvmsg), network
 * byte order, read and written one 32-bit word at a time.
 */
#define SYS_REJECT 0
#define SYS_PROCEED 1
#define ECONNREFUSED 111
#define SOCK_STREAM 1
#define SOCK_DGRAM 2
#define AF_INET6 10

/* A socket of the agent's network namespace (the node's host processes). */
static __always_inline int host_socket(struct bpf_sock_addr *ctx)
{
	__u32 zero = 0;
	struct pm_sock_cfg *c = bpf_map_lookup_elem(&podmin_sock_cfg, &zero);

	if (!c || !c->netns_cookie || ctx->user_family != AF_INET6)
		return 0;
	return bpf_get_netns_cookie(ctx) == c->netns_cookie;
}

static __always_inline void get_user_addr(struct bpf_sock_addr *ctx, struct in6_addr *a)
{
	a->in6_u.u6_addr32[0] = ctx->user_ip6[0];
	a->in6_u.u6_addr32[1] = ctx->user_ip6[1];
	a->in6_u.u6_addr32[2] = ctx->user_ip6[2];
	a->in6_u.u6_addr32[3] = ctx->user_ip6[3];
}

static __always_inline void set_user_addr(struct bpf_sock_addr *ctx, const struct in6_addr *a,
					  __be16 port)
{
	ctx->user_ip6[0] = a->in6_u.u6_addr32[0];
	ctx->user_ip6[1] = a->in6_u.u6_addr32[1];
	ctx->user_ip6[2] = a->in6_u.u6_addr32[2];
	ctx->user_ip6[3] = a->in6_u.u6_addr32[3];
	ctx->user_port = (__u32)port;
}

/* The Service port a socket addresses by its protocol, or NULL. */
static __always_inline struct pm_svc_val *sock_service(struct bpf_sock_addr *ctx,
						       struct pm_svc_key *sk)
{
	__u32 type = ctx->type;

	if (type == SOCK_STREAM && ctx->protocol == IPPROTO_TCP)
		sk->proto = IPPROTO_TCP;
	else if (type == SOCK_DGRAM && ctx->protocol == IPPROTO_UDP)
		sk->proto = IPPROTO_UDP;
	else
		return NULL;
	get_user_addr(ctx, &sk->vip);
	sk->port = (__be16)ctx->user_port;
	return bpf_map_lookup_elem(&podmin_svc, sk);
}

/*
 * Rewrites the destination of a host socket addressing a Service port to one
 * of its backends: slot = hash(socket cookie) mod count, so one socket keeps
 * its backend (an unconnected UDP socket's datagrams too) while the slots are
 * unchanged. UDP remembers the backend for recvmsg. Returns the verdict; a
 * Service port without ready backends (or a missing slot) is refused with
 * ECONNREFUSED (bpf_set_retval; without it the kernel would report EPERM).
 */
static __always_inline int sock_forward(struct bpf_sock_addr *ctx, __u32 stat)
{
	struct pm_svc_key sk = {};
	struct pm_svc_val *svc;
	struct pm_be_key bk;
	struct pm_be_val *be;
	__u64 cookie;
	__u32 n;

	if (!host_socket(ctx))
		return SYS_PROCEED;
	svc = sock_service(ctx, &sk);
	if (!svc)
		return SYS_PROCEED;
	n = svc->count;
	cookie = bpf_get_socket_cookie(ctx);
	if (n) {
		bk.id = svc->id;
		bk.slot = mix32((__u32)cookie ^ mix32((__u32)(cookie >> 32))) % n;
		be = bpf_map_lookup_elem(&podmin_be, &bk);
	} else {
		be = NULL;
	}
	if (!be) {
		count(PM_STAT_SOCK_REFUSED);
		bpf_set_retval(-ECONNREFUSED);
		return SYS_REJECT;
	}
	if (sk.proto == IPPROTO_UDP) {
		struct pm_sock_key rk = {};
		struct pm_sock_val rv = {};
		struct pm_sock_val *cur;

		rk.cookie = cookie;
		rk.addr = be->addr;
		rk.port = be->port;
		rv.vip = sk.vip;
		rv.port = sk.port;
		rv.proto = sk.proto;
		cur = bpf_map_lookup_elem(&podmin_sock, &rk);
		if (!cur || !addr_eq(&cur->vip, &rv.vip) || cur->port != rv.port)
			bpf_map_update_elem(&podmin_sock, &rk, &rv, BPF_ANY);
	}
	set_user_addr(ctx, &be->addr, be->port);
	count(stat);
	return SYS_PROCEED;
}

SEC("cgroup/connect6")
int podmin_connect6(struct bpf_sock_addr *ctx)
{
	return sock_forward(ctx, PM_STAT_SOCK_CONNECT);
}

SEC("cgroup/sendmsg6")
int podmin_sendmsg6(struct bpf_sock_addr *ctx)
{
	return sock_forward(ctx, PM_STAT_SOCK_SENDMSG);
}

/*
 * A datagram's source that is a backend this socket sent to through a
 * Service port is rewritten back to the VIP:port, while that Service port
 * exists (a stale entry is deleted). recvmsg programs must return 1.
 */
SEC("cgroup/recvmsg6")
int podmin_recvmsg6(struct bpf_sock_addr *ctx)
{
	struct pm_sock_key rk = {};
	struct pm_sock_val *rv;
	struct pm_svc_key sk = {};

	if (!host_socket(ctx))
		return SYS_PROCEED;
	rk.cookie = bpf_get_socket_cookie(ctx);
	get_user_addr(ctx, &rk.addr);
	rk.port = (__be16)ctx->user_port;
	rv = bpf_map_lookup_elem(&podmin_sock, &rk);
	if (!rv)
		return SYS_PROCEED;
	sk.vip = rv->vip;
	sk.port = rv->port;
	sk.proto = rv->proto;
	if (!bpf_map_lookup_elem(&podmin_svc, &sk)) {
		bpf_map_delete_elem(&podmin_sock, &rk);
		return SYS_PROCEED;
	}
	set_user_addr(ctx, &sk.vip, sk.port);
	count(PM_STAT_SOCK_RECVMSG);
	return SYS_PROCEED;
}
