# shellcheck shell=bash
# Podmin vmconfig: instance-role access to AWS without the AWS CLI (sourced by bootstrap.sh and
# inlined into the user-data by the CLI). Needs log/die from the caller.
#
# IMDSv2: PUT /latest/api/token, then GETs with the token header. The role's temporary
# credentials sign requests through curl --aws-sigv4; they are handed to curl on stdin (-K -),
# never on its command line, so other processes cannot read them from /proc.
#
# Overrides (tests): PODMIN_IMDS_ENDPOINTS (space-separated base URLs tried in order),
# PODMIN_IMDS_ATTEMPTS, PODMIN_CURL_RETRIES, PODMIN_EC2_ENDPOINT (default
# https://ec2.<region>.api.aws, the dual-stack endpoint).

PODMIN_IMDS_ENDPOINTS=${PODMIN_IMDS_ENDPOINTS:-"http://169.254.169.254 http://[fd00:ec2::254]"}
PODMIN_IMDS_ATTEMPTS=${PODMIN_IMDS_ATTEMPTS:-60}
PODMIN_CURL_RETRIES=${PODMIN_CURL_RETRIES:-5}
IMDS_ENDPOINT=
IMDS_TOKEN=
AWS_CREDS_KEY=
AWS_CREDS_SECRET=
AWS_CREDS_TOKEN=
# The sha256 of an empty payload: S3 wants x-amz-content-sha256 on SigV4 requests.
readonly EMPTY_SHA256=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855

# imds_token: finds a responding IMDS endpoint and takes a session token (bounded retries).
imds_token() {
  local attempt ep token
  for ((attempt = 1; attempt <= PODMIN_IMDS_ATTEMPTS; attempt++)); do
    for ep in $PODMIN_IMDS_ENDPOINTS; do
      if token=$(curl -fsS --connect-timeout 2 --max-time 5 -X PUT \
        -H 'X-aws-ec2-metadata-token-ttl-seconds: 21600' "$ep/latest/api/token" 2>/dev/null) &&
        [[ $token =~ ^[A-Za-z0-9+/=_-]+$ && ${#token} -le 512 ]]; then
        IMDS_ENDPOINT=$ep IMDS_TOKEN=$token
        return 0
      fi
    done
    sleep 2
  done
  log "instance metadata service (IMDSv2) unreachable at: $PODMIN_IMDS_ENDPOINTS"
  return 1
}

# imds_get PATH: prints /latest/PATH (e.g. meta-data/instance-id).
imds_get() {
  [[ -n $IMDS_TOKEN ]] || imds_token || return 1
  curl -fsS --connect-timeout 2 --max-time 10 --retry 3 \
    -H "X-aws-ec2-metadata-token: $IMDS_TOKEN" "$IMDS_ENDPOINT/latest/$1"
}

# imds_mode: IPv6 when the working endpoint is the IPv6 one, else IPv4.
imds_mode() { if [[ $IMDS_ENDPOINT == *'['* ]]; then echo IPv6; else echo IPv4; fi; }

# json_string JSON FIELD: the string value of a top-level field of a flat JSON object.
json_string() {
  local re="\"$2\"[[:space:]]*:[[:space:]]*\"([^\"\\\\]*)\""
  [[ $1 =~ $re ]] && printf '%s' "${BASH_REMATCH[1]}"
}

# aws_role_credentials: loads the instance role's temporary credentials (waits for the role).
aws_role_credentials() {
  local attempt role json
  for ((attempt = 1; attempt <= PODMIN_IMDS_ATTEMPTS; attempt++)); do
    if role=$(imds_get meta-data/iam/security-credentials/ 2>/dev/null) && role=${role%%$'\n'*} &&
      [[ $role =~ ^[A-Za-z0-9+=,.@_-]{1,128}$ ]] &&
      json=$(imds_get "meta-data/iam/security-credentials/$role" 2>/dev/null); then
      AWS_CREDS_KEY=$(json_string "$json" AccessKeyId) || AWS_CREDS_KEY=
      AWS_CREDS_SECRET=$(json_string "$json" SecretAccessKey) || AWS_CREDS_SECRET=
      AWS_CREDS_TOKEN=$(json_string "$json" Token) || AWS_CREDS_TOKEN=
      # (ERE bounds stop at 255: longer limits are checked with ${#…}.)
      if [[ $AWS_CREDS_KEY =~ ^[A-Za-z0-9]{4,128}$ && $AWS_CREDS_SECRET =~ ^[A-Za-z0-9+/=]+$ &&
        $AWS_CREDS_TOKEN =~ ^[A-Za-z0-9+/=]+$ && ${#AWS_CREDS_SECRET} -le 256 &&
        ${#AWS_CREDS_TOKEN} -le 8192 ]]; then
        return 0
      fi
      log "instance role credentials are malformed"
      return 1
    fi
    sleep 2
  done
  log "no instance role credentials in the instance metadata"
  return 1
}

# aws_request SERVICE REGION CURL-ARGS...: curl signed with the role credentials (SigV4). An
# HTTP error status is not a curl failure here (see aws_curl).
aws_request() {
  local service=$1 region=$2
  shift 2
  [[ -n $AWS_CREDS_KEY ]] || aws_role_credentials || return 1
  curl -K - --aws-sigv4 "aws:amz:${region}:${service}" -sS --connect-timeout 5 \
    --retry "$PODMIN_CURL_RETRIES" --retry-connrefused --retry-delay 1 "$@" <<CONF
user = "${AWS_CREDS_KEY}:${AWS_CREDS_SECRET}"
header = "x-amz-security-token: ${AWS_CREDS_TOKEN}"
CONF
}

# aws_curl SERVICE REGION CURL-ARGS...: aws_request that fails on an HTTP error status.
aws_curl() { aws_request "$1" "$2" -f "${@:3}"; }

# ec2_call REGION PARAMS: one EC2 Query API call (POST "Action=...&..."); prints the response
# body (on an error: EC2's XML naming the error Code) and fails unless the status is 2xx.
# (Called in $(...), it cannot keep the credentials it loads: load them first.)
ec2_call() {
  local out status
  out=$(aws_request ec2 "$1" --max-time 60 -w '\n%{http_code}' \
    --data "$2&Version=2016-11-15" "${PODMIN_EC2_ENDPOINT:-https://ec2.$1.api.aws}/") || return 1
  status=${out##*$'\n'}
  printf '%s\n' "${out%$'\n'*}"
  [[ $status == 2[0-9][0-9] ]]
}

# ec2_error_code RESPONSE: the <Code> of an EC2 error response.
ec2_error_code() {
  local re='<Code>([A-Za-z0-9.]{1,100})</Code>'
  [[ $1 =~ $re ]] && printf '%s' "${BASH_REMATCH[1]}"
}

# s3_get BASE-URL REGION KEY OUT: downloads one object (BASE-URL ends before "/KEY").
s3_get() {
  aws_curl s3 "$2" --max-time 900 -H "x-amz-content-sha256: $EMPTY_SHA256" \
    -o "$4" "$1/$3"
}
