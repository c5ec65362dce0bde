/**
 * Where provider credentials come from at attempt time (Worker secrets/env in production). Only a
 * secret's name travels in config and plans; its value is read here and goes into one header.
 */
export interface CredentialSource {
  get(secretName: string): string | undefined;
}
