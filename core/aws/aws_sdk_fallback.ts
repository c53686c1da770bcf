/**
 * The AWS SDK's credential provider chain, for profiles that Podmin's own chain
 * (core/aws/aws_credentials.ts) does not resolve: assumed roles, SSO, web identity, container
 * credentials. A program that ships the SDK registers it (the CLI, cli/aws_sdk_credentials.ts);
 * the agent does not, so its bundle carries none of the SDK (about 1 MB of code and 5 MiB of RSS,
 * issue 15). This module imports nothing, so registering costs a program's start nothing.
 */

/** Credentials as the SDK's providers return them. */
export interface SdkCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  expiration?: Date;
}

/** Resolves credentials through the SDK's chain (it reads the process environment). */
export type SdkCredentialProvider = () => Promise<SdkCredentials>;

let registered: SdkCredentialProvider | undefined;

/** Makes the SDK's chain available to core/aws/aws_credentials.ts (at program start; undefined: none). */
export function registerSdkCredentials(provider: SdkCredentialProvider | undefined): void {
  registered = provider;
}

/** The registered provider, if this program ships the SDK. */
export function sdkCredentialProvider(): SdkCredentialProvider | undefined {
  return registered;
}
