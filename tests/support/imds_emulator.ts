/**
 * A small IMDSv2 emulator for vmconfig's boot tests and the machine harness
 * (tests/support/machine.ts, which makes it reachable from inside a machine at 169.254.169.254
 * and [fd00:ec2::254]), on 127.0.0.1: session tokens (PUT
 * /latest/api/token; GETs without the token get 401), instance identity, the instance role's
 * credentials (`testing`/`testing` unless given), instance tags
 * (`meta-data/tags/instance/<key>`) and per-ENI network metadata (device number, ENI id, IPv6
 * addresses and prefix, private IPv4 addresses, the subnet's IPv4 CIDR block, the VPC's IPv6 CIDR
 * blocks). It also answers the EC2 calls bootstrap
 * makes (POST /, which moto does not model here): `AssignIpv6Addresses` with
 * `Ipv6PrefixCount=1`, after which the prefix appears in the ENI's metadata, and
 * `AttachNetworkInterface`, after which an attachable ENI appears in the metadata with the
 * requested device number. EC2 requests must be SigV4-signed with the role credentials; every
 * attach call is recorded.
 */

/** One ENI as the metadata shows it. */
export interface EmulatedEni {
  mac: string;
  deviceNumber: number;
  interfaceId: string;
  ipv6s: string[];
  /** The delegated prefix; absent until assigned. */
  ipv6Prefix?: string;
  /** What AssignIpv6Addresses delegates. */
  prefixToAssign?: string;
  /** Private IPv4 addresses (`local-ipv4s`), the primary first. */
  localIpv4s?: string[];
  /** The IPv4 CIDR block of the ENI's subnet (`subnet-ipv4-cidr-block`). */
  subnetIpv4CidrBlock?: string;
  /** The IPv6 CIDR blocks of the ENI's VPC (`vpc-ipv6-cidr-blocks`, one per line). */
  vpcIpv6CidrBlocks?: string[];
}

/** One AttachNetworkInterface request as the emulator received it. */
export interface AttachCall {
  networkInterfaceId: string | null;
  instanceId: string | null;
  deviceIndex: string | null;
  /** The error code answered, or undefined when the ENI was attached. */
  error?: string;
}

/** What the emulated instance's metadata holds. */
export interface ImdsOptions {
  instanceId: string;
  availabilityZone: string;
  roleName?: string;
  /**
   * The instance role's credentials (default `testing`/`testing` with `ROLE_TOKEN`), e.g. an
   * assumed role's on an IAM-enforcing moto.
   */
  roleCredentials?: { accessKeyId: string; secretAccessKey: string; sessionToken: string };
  enis: EmulatedEni[];
  /** Instance tags (instance metadata tags on). */
  tags?: Record<string, string>;
  /** ENIs AttachNetworkInterface may attach (the call gives the device number). */
  attachable?: Array<Omit<EmulatedEni, "deviceNumber">>;
  /** How many attach calls are answered InvalidNetworkInterface.InUse first (an old instance). */
  attachInUse?: number;
  /** Called after an ENI is attached (e.g. to plug its interface in); not awaited. */
  onAttach?: (eni: EmulatedEni) => Promise<void>;
  /** Called before a prefix is assigned; returns a violation message or undefined. */
  beforeAssign?: (eni: EmulatedEni) => Promise<string | undefined>;
}

/** A running emulator. */
export interface Imds {
  endpoint: string;
  /** Every request: "METHOD PATH". */
  requests: string[];
  /** Problems the emulator saw (unsigned EC2 call, assignment too early, …). */
  violations: string[];
  /** When AssignIpv6Addresses was answered (ms since epoch), if it was. */
  assignedAt?: number;
  /** Every AttachNetworkInterface request, in order. */
  attachCalls: AttachCall[];
  close(): Promise<void>;
}

const TOKEN = "AQAEAEmulatedTokenForPodminTests==";
/** The instance role's default session token. */
export const ROLE_TOKEN = "IQoJb3JpZ2luX2VjEPodminTestSessionToken+/=";

/** Starts an emulator on a free loopback port. */
export function startImds(o: ImdsOptions): Imds {
  const role = o.roleName ?? "podmin-node";
  const creds = o.roleCredentials ??
    { accessKeyId: "testing", secretAccessKey: "testing", sessionToken: ROLE_TOKEN };
  const state: Imds = {
    endpoint: "",
    requests: [],
    violations: [],
    attachCalls: [],
    close: async () => {},
  };
  const text = (body: string, status = 200) =>
    new Response(body, { status, headers: { "content-type": "text/plain" } });
  const ec2Error = (code: string, message: string, status = 400) =>
    new Response(
      `<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>${code}</Code>` +
        `<Message>${message}</Message></Error></Errors><RequestID>emulated</RequestID></Response>`,
      { status, headers: { "content-type": "text/xml" } },
    );
  let inUse = o.attachInUse ?? 0;

  const handler = async (req: Request): Promise<Response> => {
    const url = new URL(req.url);
    state.requests.push(`${req.method} ${url.pathname}`);
    if (req.method === "PUT" && url.pathname === "/latest/api/token") {
      if (!req.headers.get("x-aws-ec2-metadata-token-ttl-seconds")) return text("", 400);
      return text(TOKEN);
    }
    if (req.method === "POST" && url.pathname === "/") return await ec2(req);
    if (req.method !== "GET") return text("", 405);
    if (req.headers.get("x-aws-ec2-metadata-token") !== TOKEN) return text("", 401);
    const p = url.pathname.replace(/^\/latest\//, "");
    const md: Record<string, string> = {
      "meta-data/instance-id": o.instanceId,
      "meta-data/placement/availability-zone": o.availabilityZone,
      "meta-data/iam/security-credentials/": `${role}`,
      [`meta-data/iam/security-credentials/${role}`]: JSON.stringify({
        Code: "Success",
        Type: "AWS-HMAC",
        AccessKeyId: creds.accessKeyId,
        SecretAccessKey: creds.secretAccessKey,
        Token: creds.sessionToken,
        Expiration: new Date(Date.now() + 6 * 3600_000).toISOString(),
      }),
      "meta-data/network/interfaces/macs/": o.enis.map((e) => `${e.mac}/`).join("\n"),
    };
    if (o.tags) {
      // As on EC2, only with instance metadata tags on: the key list, then one path per key.
      md["meta-data/tags/instance"] = Object.keys(o.tags).join("\n");
      for (const [k, v] of Object.entries(o.tags)) md[`meta-data/tags/instance/${k}`] = v;
    }
    for (const e of o.enis) {
      const base = `meta-data/network/interfaces/macs/${e.mac}/`;
      md[`${base}device-number`] = String(e.deviceNumber);
      md[`${base}interface-id`] = e.interfaceId;
      if (e.ipv6s.length) md[`${base}ipv6s`] = e.ipv6s.join("\n");
      if (e.ipv6Prefix) md[`${base}ipv6-prefix`] = e.ipv6Prefix;
      if (e.localIpv4s?.length) md[`${base}local-ipv4s`] = e.localIpv4s.join("\n");
      if (e.subnetIpv4CidrBlock) md[`${base}subnet-ipv4-cidr-block`] = e.subnetIpv4CidrBlock;
      if (e.vpcIpv6CidrBlocks?.length) {
        md[`${base}vpc-ipv6-cidr-blocks`] = e.vpcIpv6CidrBlocks.join("\n");
      }
    }
    const body = md[p];
    return body === undefined ? text("Not Found", 404) : text(body);
  };

  const ec2 = async (req: Request): Promise<Response> => {
    const form = new URLSearchParams(await req.text());
    const auth = req.headers.get("authorization") ?? "";
    const scope = new RegExp(
      `^AWS4-HMAC-SHA256 Credential=${creds.accessKeyId}/\\d{8}/[a-z0-9-]+/ec2/aws4_request,`,
    );
    if (!scope.test(auth)) {
      state.violations.push(`EC2 call not SigV4-signed with the role credentials: ${auth}`);
      return text(
        "<Response><Errors><Error><Code>AuthFailure</Code></Error></Errors></Response>",
        401,
      );
    }
    if (req.headers.get("x-amz-security-token") !== creds.sessionToken) {
      state.violations.push("EC2 call without the role's session token");
      return text("", 403);
    }
    if (form.get("Version") !== "2016-11-15") {
      state.violations.push(`EC2 call without Version=2016-11-15: ${form.toString()}`);
    }
    if (form.get("Action") === "AttachNetworkInterface") return attach(form);
    const eni = o.enis.find((e) => e.interfaceId === form.get("NetworkInterfaceId"));
    if (
      form.get("Action") !== "AssignIpv6Addresses" || !eni || form.get("Ipv6PrefixCount") !== "1"
    ) {
      state.violations.push(`unexpected EC2 call ${form.toString()}`);
      return text("", 400);
    }
    const problem = await o.beforeAssign?.(eni);
    if (problem) state.violations.push(problem);
    eni.ipv6Prefix = eni.prefixToAssign;
    state.assignedAt = Date.now();
    return new Response(
      `<AssignIpv6AddressesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">` +
        `<networkInterfaceId>${eni.interfaceId}</networkInterfaceId>` +
        `<assignedIpv6PrefixSet><item>${eni.ipv6Prefix}</item></assignedIpv6PrefixSet>` +
        `</AssignIpv6AddressesResponse>`,
      { headers: { "content-type": "text/xml" } },
    );
  };

  const attach = (form: URLSearchParams): Response => {
    const call: AttachCall = {
      networkInterfaceId: form.get("NetworkInterfaceId"),
      instanceId: form.get("InstanceId"),
      deviceIndex: form.get("DeviceIndex"),
    };
    state.attachCalls.push(call);
    const spare = o.attachable?.find((e) => e.interfaceId === call.networkInterfaceId);
    if (!spare) {
      call.error = "InvalidNetworkInterfaceID.NotFound";
      return ec2Error(
        call.error,
        `The networkInterface ID '${call.networkInterfaceId}' does not exist`,
      );
    }
    if (call.instanceId !== o.instanceId) {
      call.error = "InvalidInstanceID.NotFound";
      state.violations.push(`attach to another instance: ${call.instanceId}`);
      return ec2Error(call.error, `The instance ID '${call.instanceId}' does not exist`);
    }
    if (o.enis.some((e) => e.interfaceId === spare.interfaceId)) {
      call.error = "InvalidNetworkInterface.InUse";
      state.violations.push(`attach of ${spare.interfaceId}, already attached to this instance`);
      return ec2Error(call.error, `Interface: [${spare.interfaceId}] in use.`);
    }
    if (inUse > 0) {
      inUse--;
      call.error = "InvalidNetworkInterface.InUse";
      return ec2Error(call.error, `Interface: [${spare.interfaceId}] in use.`);
    }
    const device = Number(call.deviceIndex);
    if (!/^[0-9]+$/.test(call.deviceIndex ?? "") || o.enis.some((e) => e.deviceNumber === device)) {
      call.error = "InvalidParameterValue";
      return ec2Error(call.error, `Invalid device index ${call.deviceIndex}`);
    }
    const eni: EmulatedEni = { ...spare, deviceNumber: device };
    o.enis.push(eni);
    void o.onAttach?.(eni).catch((e) => state.violations.push(`onAttach failed: ${e}`));
    return new Response(
      `<AttachNetworkInterfaceResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">` +
        `<requestId>emulated</requestId><attachmentId>eni-attach-0123456789abcdef0</attachmentId>` +
        `<networkCardIndex>0</networkCardIndex></AttachNetworkInterfaceResponse>`,
      { headers: { "content-type": "text/xml" } },
    );
  };

  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, handler);
  state.endpoint = `http://127.0.0.1:${server.addr.port}`;
  state.close = () => server.shutdown();
  return state;
}
