// The WebSocket link to a kibitz server: JSON frames, request ids, automatic reconnection.
//
// The connection knows nothing about rooms; the app listens for "message", "open" and
// "status" events and decides what to resend (a "resume") after a reconnection.

const BACKOFF_START_MS = 400;
const BACKOFF_MAX_MS = 10000;
const PING_EVERY_MS = 25000;
const REQUEST_TIMEOUT_MS = 15000;

/** The ws:// or wss:// URL of the server that served this page. */
export function defaultSocketUrl(loc = window.location) {
  const scheme = loc.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${loc.host}/ws`;
}

/** An error reply from the server, with its stable code ("room/unknown", "move/illegal"...). */
export class ServerError extends Error {
  constructor(code, message) {
    super(message || code);
    this.code = code;
  }
}

export class Connection extends EventTarget {
  constructor(url = defaultSocketUrl()) {
    super();
    this.url = url;
    this.socket = null;
    this.status = "idle"; // idle | connecting | open | reconnecting | closed
    this.attempt = 0;
    this.nextRid = 1;
    this.pending = new Map(); // rid -> {resolve, reject, timer}
    this.queue = []; // frames written while the socket was not open
    this.retryTimer = null;
    this.pingTimer = null;
    this.closedByUs = false;
  }

  connect() {
    this.closedByUs = false;
    this._open();
  }

  close() {
    this.closedByUs = true;
    clearTimeout(this.retryTimer);
    clearInterval(this.pingTimer);
    if (this.socket) this.socket.close();
    this._setStatus("closed");
  }

  /** Send a message without waiting for its reply. Queued while disconnected. */
  send(message) {
    const frame = JSON.stringify(message);
    if (this.socket && this.socket.readyState === WebSocket.OPEN) {
      this.socket.send(frame);
    } else {
      this.queue.push(frame);
    }
  }

  /**
   * Send a message with a fresh "rid" and resolve with the first reply carrying it
   * ("seat", "state", "pong"), or with the first message for which `match` is true (a
   * server need not echo "rid" in a broadcast state); reject with a ServerError on an
   * "error" reply.
   */
  request(message, { match = null } = {}) {
    const rid = this.nextRid++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(rid);
        reject(new ServerError("client/timeout", `no reply to ${message.type} from the server`));
      }, REQUEST_TIMEOUT_MS);
      this.pending.set(rid, { resolve, reject, timer, match });
      this.send({ ...message, rid });
    });
  }

  /** Send with a fresh "rid" without waiting; returns the rid. */
  sendWithRid(message) {
    const rid = this.nextRid++;
    this.send({ ...message, rid });
    return rid;
  }

  _setStatus(status) {
    if (this.status === status) return;
    this.status = status;
    this.dispatchEvent(new CustomEvent("status", { detail: status }));
  }

  _open() {
    clearTimeout(this.retryTimer);
    this._setStatus(this.attempt === 0 ? "connecting" : "reconnecting");
    let socket;
    try {
      socket = new WebSocket(this.url);
    } catch (err) {
      this._scheduleRetry();
      return;
    }
    this.socket = socket;
    socket.addEventListener("open", () => {
      const reconnected = this.attempt > 0;
      this.attempt = 0;
      this._setStatus("open");
      clearInterval(this.pingTimer);
      this.pingTimer = setInterval(() => this.send({ type: "ping" }), PING_EVERY_MS);
      // Let the app resend what restores its state (resume) before anything queued.
      this.dispatchEvent(new CustomEvent("open", { detail: { reconnected } }));
      const queued = this.queue;
      this.queue = [];
      for (const frame of queued) socket.send(frame);
    });
    socket.addEventListener("message", (event) => this._receive(event.data));
    socket.addEventListener("close", () => {
      if (this.socket !== socket) return;
      clearInterval(this.pingTimer);
      this.socket = null;
      if (this.closedByUs) return;
      this._scheduleRetry();
    });
    // "error" is always followed by "close"; nothing to do here.
  }

  _scheduleRetry() {
    this.attempt += 1;
    this._setStatus("reconnecting");
    const base = Math.min(BACKOFF_MAX_MS, BACKOFF_START_MS * 2 ** (this.attempt - 1));
    const delay = base / 2 + Math.random() * (base / 2); // jitter spreads a herd of clients
    this.retryTimer = setTimeout(() => this._open(), delay);
  }

  _receive(data) {
    let message;
    try {
      message = JSON.parse(data);
    } catch {
      return; // the browser asks for JSON; anything else is not for us
    }
    // Promise callbacks run after this handler, so the app has seen the message (a seat,
    // a state) before a waiting caller resumes.
    const answered = this._answer(message);
    if (!(answered && message.type === "error")) {
      // An error that answers a request is the requester's to show.
      this.dispatchEvent(new CustomEvent("message", { detail: message }));
    }
  }

  _answer(message) {
    let rid = message.rid;
    if (rid === undefined || rid === null || !this.pending.has(rid)) {
      rid = undefined;
      if (message.type !== "error") {
        for (const [key, entry] of this.pending) {
          if (entry.match && entry.match(message)) {
            rid = key;
            break;
          }
        }
      }
    }
    if (rid === undefined) return false;
    const { resolve, reject, timer } = this.pending.get(rid);
    this.pending.delete(rid);
    clearTimeout(timer);
    if (message.type === "error") reject(new ServerError(message.code, message.message));
    else resolve(message);
    return true;
  }
}
