// A chart's mark (viz/selection.py: the chosen head on a figure kept for every head) put into its figure before
// the figure is first drawn (ui/components/lens_chart/chart.js `draw`).
//
// A figure with its update ([restyle, relayout], viz/selection.py) applied as Plotly.update would apply it to the
// chart drawn: a chart drawn for the first time (a view's first visit, a layer change, a view drawn ahead) is drawn
// once, with its mark, not drawn and then updated. The update of a flip chart's slider restyles `visible`, which
// made plotly.js compute the whole figure a second time (at 64 tokens: the attention lines 57-75 ms, the flip chart
// 28-48 ms). The rules are those of ui/plotly_spec.py apply_update: a restyle value that is a list gives trace i
// its item i (modulo its length), any other value every trace; a relayout path ("annotations[3].font.color",
// "sliders[0].active") is set in the layout; null removes the attribute.
export function withUpdate(figure, [restyle, relayout]) {
  (figure.data || []).forEach((trace, i) => {
    for (const [path, value] of Object.entries(restyle || {})) {
      setPath(trace, path, Array.isArray(value) ? value[i % value.length] : value);
    }
  });
  figure.layout = figure.layout || {};
  for (const [path, value] of Object.entries(relayout || {})) setPath(figure.layout, path, value);
  return figure;
}

function setPath(target, path, value) {
  const steps = [];
  for (const part of path.split(".")) {
    const [name, ...indices] = part.split("[");
    steps.push(name, ...indices.map((index) => parseInt(index, 10)));
  }
  for (let i = 0; i < steps.length - 1; i++) {
    const step = steps[i];
    if (target[step] === undefined || target[step] === null) target[step] = typeof steps[i + 1] === "number" ? [] : {};
    target = target[step];
  }
  const last = steps[steps.length - 1];
  if ((value === null || value === undefined) && typeof last === "string") delete target[last];
  else target[last] = value;
}
