// Reruns the fragment that drew it, a while after it was drawn (ui/waiter.py): the server's way to look again for
// work it runs in the background (the header's all-layers check) without a timer of its own and without a full
// rerun. `data` is JSON (as bytes) of {ms, round}: the wait, and a count that is new each time it is drawn.
// Drawn again with a new round, it waits again; no longer drawn, it stops. Until then it asks again every `ms`: a
// rerun asked for while another run of the page was under way can be merged into that one, and the fragment is
// then not drawn again (the page would wait forever).

const timers = (window.__lensWait ||= new Map()); // element -> {round, timer}

function text(data) {
  if (typeof data === "string") return data;
  if (data instanceof ArrayBuffer) return new TextDecoder().decode(new Uint8Array(data));
  if (ArrayBuffer.isView(data)) return new TextDecoder().decode(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
  return "null";
}

export default function (component) {
  const element = component.parentElement.closest('[data-testid="stElementContainer"]');
  if (element) element.style.display = "none"; // it draws nothing
  let data = null;
  try {
    data = JSON.parse(text(component.data));
  } catch (err) {
    return undefined;
  }
  if (!data || !(data.ms >= 0)) return undefined;
  const owner = component.parentElement;
  let entry = timers.get(owner);
  if (!entry || entry.round !== data.round) {
    // a new drawing: wait again (a render of the same drawing keeps its timer)
    if (entry) clearInterval(entry.timer);
    let asks = 0;
    const ask = () => component.setTriggerValue("due", `${data.round}.${++asks}`);
    entry = { round: data.round, timer: setInterval(ask, Math.max(data.ms, 100)) };
    timers.set(owner, entry);
  }
  const mine = entry;
  return () => {
    // no longer drawn: stop waiting
    if (timers.get(owner) === mine) {
      clearInterval(mine.timer);
      timers.delete(owner);
    }
  };
}
