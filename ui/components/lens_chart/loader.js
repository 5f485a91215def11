// The inline part of the lens chart (ui/chart.py): Streamlit sends a component's inline JavaScript with
// every element, so this stays small (ui/chart.py inline_js leaves its comment lines out) and imports the
// chart itself (chart.js) once per page from the app's own server. baseUrl() comes from ../base_url.js
// (ui/chart.py puts it in front).

const SETTINGS = __LENS_SETTINGS__; // {module, plotly: [routes, best first], full, types, config}
let chart = null;

// plotly.js (a plain script, not a module) from one route: {route, plotly} once it has run.
function fetchScript(base, route) {
  return new Promise((resolve, reject) => {
    const script = document.createElement("script");
    script.src = base + route;
    script.async = true;
    script.onload = () => (window.Plotly ? resolve({ route, plotly: window.Plotly }) : reject(new Error("plotly.js did not load")));
    script.onerror = () => {
      script.remove();
      reject(new Error("plotly.js could not be fetched from " + script.src));
    };
    document.head.appendChild(script);
  });
}

// The page's first load of plotly.js (its best route), started by the first chart that mounts (the hidden
// preload) beside chart.js's import, not after it. One per page: every chart component's loader shares it.
function started(base) {
  if (!window.__lensPlotly) {
    window.__lensPlotly = fetchScript(base, SETTINGS.plotly[0]);
    window.__lensPlotly.catch(() => {}); // a failure is said by the first chart that needs plotly.js
  }
  return window.__lensPlotly;
}

export default function (component) {
  const base = baseUrl();
  const load = { script: fetchScript, first: started(base) };
  chart = chart || import(base + SETTINGS.module);
  return chart
    .then((module) => module.render(component, SETTINGS, base, load))
    .catch((err) => {
      chart = null; // the next rerun tries again
      const div = component.parentElement.querySelector(".lens-chart");
      if (div) div.textContent = "This chart could not be drawn: " + err.message;
    });
}
