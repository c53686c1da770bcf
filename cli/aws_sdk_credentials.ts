/**
 * Registers the AWS SDK's credential chain for the CLI (core/aws/aws_sdk_fallback.ts): an operator's
 * profile may assume a role or use SSO. The SDK is imported when such a profile is first used,
 * never at start.
 */

import { registerSdkCredentials } from "../core/aws/aws_sdk_fallback.ts";

registerSdkCredentials(async () => {
  const { defaultProvider } = await import("@aws-sdk/credential-provider-node");
  return await defaultProvider()();
});
