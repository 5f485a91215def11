// The app's base URL, for the inline loaders of the app's components (ui/chart.py: inline_js puts this in
// front of each).
function baseUrl() {
  // Streamlit's own bundle is served from <base>/static/js/index.<hash>.js: the app's base URL is
  // what comes before "static/", whatever path the app is served under.
  const own = [...document.querySelectorAll("script[src]")].find((s) => /\/static\/js\/index\.[^/]*\.js/.test(s.src));
  if (own) return own.src.replace(/static\/js\/index\.[^/]*\.js.*$/, "");
  return new URL(".", window.location.href).href;
}
