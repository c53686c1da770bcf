// Command podsapi is a test peer: a client of kubelet's local Pods API
// (KEP-4188, gRPC service v1alpha1.Pods on a unix socket) built from the
// Kubernetes modules themselves. It prints each Pod kubelet reports as one
// JSON line (name, namespace, uid, phase, ready, IPs), so Podmin's tests can
// check what the real kubelet says about a Pod.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	podsv1alpha1 "k8s.io/kubelet/pkg/apis/pods/v1alpha1"
)

type podLine struct {
	Name      string   `json:"name"`
	Namespace string   `json:"namespace"`
	UID       string   `json:"uid"`
	Phase     string   `json:"phase"`
	Ready     bool     `json:"ready"`
	IPs       []string `json:"ips"`
}

func main() {
	socket := flag.String("socket", "/var/lib/kubelet/pods-api/pods-api.sock", "kubelet's Pods API socket")
	timeout := flag.Duration("timeout", 10*time.Second, "bound on the whole call")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+*socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintln(os.Stderr, "podsapi:", err)
		os.Exit(1)
	}
	defer conn.Close()
	res, err := podsv1alpha1.NewPodsClient(conn).ListPods(ctx, &podsv1alpha1.ListPodsRequest{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "podsapi: ListPods:", err)
		os.Exit(1)
	}
	out := json.NewEncoder(os.Stdout)
	for _, raw := range res.GetPods() {
		var pod v1.Pod
		if err := pod.Unmarshal(raw); err != nil {
			fmt.Fprintln(os.Stderr, "podsapi: decoding a v1.Pod:", err)
			os.Exit(1)
		}
		line := podLine{Name: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID), Phase: string(pod.Status.Phase)}
		for _, c := range pod.Status.Conditions {
			if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
				line.Ready = true
			}
		}
		for _, ip := range pod.Status.PodIPs {
			line.IPs = append(line.IPs, ip.IP)
		}
		_ = out.Encode(line)
	}
}
