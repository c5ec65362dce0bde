// Forwards every request to the gateway's Admin entrypoint; see wrangler.toml beside this file.
export default {
  fetch(request, env) {
    return env.ADMIN.fetch(request);
  },
};
