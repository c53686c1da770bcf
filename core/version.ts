/** The Podmin release version, shared by the CLI, the agent and user-data. */
export const VERSION = "0.1.0";
