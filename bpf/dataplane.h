/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Podmin's IPv6 Service dataplane: map layouts shared by the tc and cgroup
 * socket programs (bpf/dataplane.c) and the agent (the agent/dataplane/ map modules mirror them;
 * bpf/dataplane_object_test.ts checks the mirror against the object's BTF).
 *
 * All addresses and ports are in network byte order.
 */
#ifndef PODMIN_DATAPLANE_H
#define PODMIN_DATAPLANE_H

#include <linux/types.h>
#include <linux/in6.h>

/* Bumped whenever a key or value layout changes. */
#define PM_LAYOUT_VERSION 1

/* pm_cfg.flags */
#define PM_CFG_SERVICE_CIDR 1 /* drop unmatched traffic to svc_net/svc_mask */

/* The one entry of podmin_cfg (ARRAY, key 0). */
struct pm_cfg {
	struct in6_addr svc_net;  /* service CIDR network address */
	struct in6_addr svc_mask; /* its netmask */
	__u32 flags;              /* PM_CFG_* */
	__u32 version;            /* PM_LAYOUT_VERSION of the writer */
};

/* podmin_svc key: one Service port. */
struct pm_svc_key {
	struct in6_addr vip;
	__be16 port;
	__u8 proto; /* IPPROTO_TCP or IPPROTO_UDP */
	__u8 pad;
};

/* podmin_svc value. */
struct pm_svc_val {
	__u32 id;    /* backend slot namespace in podmin_be */
	__u32 count; /* slots 0..count-1 are valid; 0 = no ready backend (drop) */
};

/* podmin_be key: slot `slot` of Service port `id`. */
struct pm_be_key {
	__u32 id;
	__u32 slot;
};

/* podmin_be value: a ready backend. */
struct pm_be_val {
	struct in6_addr addr;
	__be16 port; /* targetPort */
	__u16 pad;
};

/* pm_ct_val.dir */
#define PM_DIR_FORWARD 1 /* client -> VIP, rewritten to backend */
#define PM_DIR_REPLY 2   /* backend -> client, rewritten to come from the VIP */

/* podmin_ct key: a packet's tuple as seen on the wire. */
struct pm_ct_key {
	struct in6_addr saddr;
	struct in6_addr daddr;
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 pad[3];
};

/* podmin_ct value: the tuple the packet is rewritten to. */
struct pm_ct_val {
	struct in6_addr saddr;
	struct in6_addr daddr;
	__be16 sport;
	__be16 dport;
	__u8 dir; /* PM_DIR_* */
	__u8 pad[3];
};

/* podmin_stats indexes (PERCPU_ARRAY of __u64). */
enum pm_stat {
	PM_STAT_NEW_FLOW = 0,       /* a Service port chose a backend */
	PM_STAT_FORWARD = 1,        /* a packet rewritten by a forward entry */
	PM_STAT_REPLY = 2,          /* a packet rewritten by a reply entry */
	PM_STAT_ICMP = 3,           /* an ICMPv6 error translated */
	PM_STAT_DROP_NO_BACKEND = 4,/* Service port without ready backends (refused with ICMPv6) */
	PM_STAT_DROP_UNMATCHED = 5, /* to the service CIDR, no Service port */
	PM_STAT_DROP_UNTRANSLATABLE = 6, /* to a VIP but fragmented / routing header / AH / ESP */
	PM_STAT_PORT_REMAP = 7,     /* source port remapped to keep reply tuples unique */
	PM_STAT_DROP_CT = 8,        /* conntrack insert failed */
	PM_STAT_ERROR = 9,          /* a helper failed while rewriting */
	PM_STAT_SOCK_CONNECT = 10,  /* a host socket's connect() to a Service port translated */
	PM_STAT_SOCK_SENDMSG = 11,  /* a host socket's unconnected UDP datagram translated */
	PM_STAT_SOCK_RECVMSG = 12,  /* a reply's source rewritten back to the VIP:port */
	PM_STAT_SOCK_REFUSED = 13,  /* a host socket refused: Service port without ready backends */
	PM_STAT_MAX = 14,
};

/*
 * The one entry of podmin_sock_cfg (ARRAY, key 0): which sockets the cgroup
 * programs translate. 0 (never written) = none.
 */
struct pm_sock_cfg {
	__u64 netns_cookie; /* the agent's network namespace (SO_NETNS_COOKIE) */
};

/*
 * podmin_sock key: a UDP socket and the backend its datagrams were sent to
 * (after translation), as recvmsg sees a reply's source.
 */
struct pm_sock_key {
	__u64 cookie;         /* bpf_get_socket_cookie() */
	struct in6_addr addr; /* backend address */
	__be16 port;          /* backend port */
	__u16 pad;
	__u32 pad2;
};

/* podmin_sock value: the Service port the socket addressed. */
struct pm_sock_val {
	struct in6_addr vip;
	__be16 port;
	__u8 proto;
	__u8 pad;
};

#endif
