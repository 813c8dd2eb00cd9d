// The WebSocket link to a kibitz server: JSON frames, request ids, and a socket that heals.
//
// A socket can die without closing: a frozen server or a dead network path leaves it
// "open" for minutes. So the connection pings the server every few seconds and, when a
// ping gets no answer (no frame at all) in time, drops the socket and reconnects with
// backoff and jitter. It knows nothing about rooms: the app (see sync.js) listens for
// "open" with {reconnected: true} and resumes what it follows.
//
// Events: "status" (connecting, open, reconnecting, closed), "open" ({reconnected}),
// "message" (every message that no request took as its answer).

const BACKOFF_START_MS = 400;
const BACKOFF_MAX_MS = 10000;
const TICK_MS = 1000; // how often the heartbeat looks at the socket
const PING_EVERY_MS = 4000;
const PONG_TIMEOUT_MS = 6000; // a ping unanswered this long: the socket is dead
const CONNECT_TIMEOUT_MS = 8000; // a socket not open after this long is given up
const REQUEST_TIMEOUT_MS = 15000;
const RETRIES = 4; // transient errors, for requests that may safely be sent again

/**
 * Messages the server answers, when they succeed, only with a "state" that carries no
 * "rid". A "ping" sent right after each of them marks the end of its handling (the server
 * handles one connection's messages in order): its "pong" settles the request.
 */
const ANSWERED_BY_STATE = new Set([
  "watch", "resume", "move", "resign",
  // The play actions and chat also succeed with a broadcast (a state, a chat line).
  "draw", "takeback", "abort", "claim", "rematch", "chat", "unseek", "lobby",
]);
const OFFSET_SAMPLES = 8; // clock offset: the pong with the shortest round trip of the last 8

/** Errors after which the same request may be sent again: the server changed nothing. */
export const TRANSIENT_ERRORS = new Set(["server/unavailable", "room/busy", "server/busy"]);

/** The ws:// or wss:// URL of the server that served this page. */
export function defaultSocketUrl(loc = window.location) {
  const scheme = loc.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${loc.host}/ws`;
}

/** An error reply from the server, with its stable code ("room/unknown", "move/illegal"...). */
export class ServerError extends Error {
  /** `details`: the whole error message or body, for the fields some codes add ("rooms"). */
  constructor(code, message, details = null) {
    super(message || code);
    this.code = code;
    this.details = details || {};
  }
}

/**
 * Whether a message does no harm when the server gets it twice: following a room again,
 * a ping, or a move or resign pinned to a version (a second copy is refused as stale).
 */
export function isIdempotent(message) {
  if (message.type === "move") return message.version !== undefined;
  return ["ping", "watch", "resume", "leave", "resign"].includes(message.type);
}

/** Exponential backoff with jitter: attempt 1, 2, ... -> a delay in milliseconds. */
export function backoffDelay(attempt, startMs = BACKOFF_START_MS, maxMs = BACKOFF_MAX_MS) {
  const base = Math.min(maxMs, startMs * 2 ** (attempt - 1));
  return base / 2 + Math.random() * (base / 2); // jitter spreads a herd of clients
}

export class Connection extends EventTarget {
  constructor(url = defaultSocketUrl()) {
    super();
    this.url = url;
    this.socket = null;
    this.status = "idle"; // idle | connecting | open | reconnecting | closed
    this.attempt = 0;
    this.everOpened = false;
    this.nextRid = 1;
    this.pending = new Map(); // rid -> {frames, rids, resolve, reject, timer}
    this.queue = []; // frames written while the socket was not open
    this.retryTimer = null;
    this.connectTimer = null;
    this.heartbeat = null;
    this.lastPing = 0;
    this.unansweredSince = null; // when the oldest unanswered ping left, or null
    this.closedByUs = false;
    this.pingSent = new Map(); // rid of a ping on the wire -> Date.now() when it left
    this.offsetSamples = []; // [{rtt, offset}] from pongs that carry the server's "at"
    this.offsetMs = 0; // server clock minus ours
  }

  /** The server's clock now, in epoch ms, as well as pongs let us estimate it. */
  serverNow() {
    return Date.now() + this.offsetMs;
  }

  connect() {
    this.closedByUs = false;
    this._open();
  }

  close() {
    this.closedByUs = true;
    clearTimeout(this.retryTimer);
    this._stopTimers();
    if (this.socket) this.socket.close();
    this._setStatus("closed");
  }

  /** Send a message without waiting for its reply. Queued while disconnected. */
  send(message) {
    const frame = JSON.stringify(message);
    if (this.socket && this.socket.readyState === WebSocket.OPEN) {
      if (message.type === "ping" && message.rid !== undefined) this.pingSent.set(message.rid, Date.now());
      this.socket.send(frame);
    } else {
      this.queue.push(frame);
    }
  }

  /**
   * Send a message with a fresh "rid" and resolve with the reply carrying it ("seat",
   * "pong"; for watch, resume, move and resign, the "pong" of the ping that follows them,
   * once the server has handled them); reject with a ServerError on an "error" reply.
   *
   * A transient error (server/unavailable, room/busy) is retried with backoff, a few
   * times, when the message is idempotent. When the socket dies before the reply, an
   * idempotent message is sent again on the next socket; any other is rejected with
   * "client/disconnected", since the server may or may not have acted on it.
   */
  async request(message) {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this._requestOnce(message);
      } catch (err) {
        const again = TRANSIENT_ERRORS.has(err.code) && isIdempotent(message) && attempt <= RETRIES;
        if (!again) throw err;
        await new Promise((resolve) => setTimeout(resolve, backoffDelay(attempt)));
      }
    }
  }

  /** Send with a fresh "rid" without waiting; returns the rid. */
  sendWithRid(message) {
    const rid = this.nextRid++;
    this.send({ ...message, rid });
    return rid;
  }

  /** Ping now, for a quick verdict on the socket (the tab woke up, the network came back). */
  checkNow() {
    if (this.status === "open") this._ping();
    else if (this.status === "reconnecting") this._open(); // skip the rest of the backoff
  }

  /** Drop the socket as a dead one is dropped (no pong), and heal: reconnect and resume. */
  dropSocket(reason = "dropped") {
    if (this.socket) this._abandon(this.socket, reason);
  }

  _requestOnce(message) {
    const frames = [{ ...message, rid: this.nextRid++ }];
    if (ANSWERED_BY_STATE.has(message.type)) frames.push({ type: "ping", rid: this.nextRid++ });
    const rids = frames.map((frame) => frame.rid);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        for (const rid of rids) this.pending.delete(rid);
        reject(new ServerError("client/timeout", `no reply to ${message.type} from the server`));
      }, REQUEST_TIMEOUT_MS);
      const entry = { frames, rids, resolve, reject, timer };
      for (const rid of rids) this.pending.set(rid, entry);
      for (const frame of frames) this.send(frame);
    });
  }

  _setStatus(status) {
    if (this.status === status) return;
    this.status = status;
    this.dispatchEvent(new CustomEvent("status", { detail: status }));
  }

  _open() {
    clearTimeout(this.retryTimer);
    if (this.socket) return; // already trying
    this._setStatus(this.everOpened ? "reconnecting" : "connecting");
    let socket;
    try {
      socket = new WebSocket(this.url);
    } catch (err) {
      this._scheduleRetry();
      return;
    }
    this.socket = socket;
    // A frozen server accepts the TCP connection but never answers the upgrade.
    clearTimeout(this.connectTimer);
    this.connectTimer = setTimeout(() => this._abandon(socket, "connect timeout"), CONNECT_TIMEOUT_MS);
    socket.addEventListener("open", () => {
      if (this.socket !== socket) return;
      clearTimeout(this.connectTimer);
      const reconnected = this.everOpened;
      this.everOpened = true;
      this.attempt = 0;
      this._startHeartbeat();
      this._setStatus("open");
      // Let the app resend what restores its state (resume) before anything queued.
      this.dispatchEvent(new CustomEvent("open", { detail: { reconnected } }));
      const queued = this.queue;
      this.queue = [];
      for (const frame of queued) socket.send(frame);
    });
    socket.addEventListener("message", (event) => {
      if (this.socket !== socket) return; // a frame from a socket we gave up on
      this.unansweredSince = null; // any frame shows the server is alive
      this._receive(event.data);
    });
    socket.addEventListener("close", () => {
      if (this.socket !== socket) return;
      this._lost();
      if (!this.closedByUs) this._scheduleRetry();
    });
    // "error" is always followed by "close"; nothing to do here.
  }

  /** Give up on a socket that looks open but is not (no pong, no upgrade) and heal. */
  _abandon(socket, reason) {
    if (this.socket !== socket) return;
    this._lost();
    try {
      socket.close(4000, reason); // its "close" event, whenever it comes, is ignored
    } catch {
      // already closing
    }
    if (!this.closedByUs) this._scheduleRetry();
  }

  /** The socket is gone: stop its timers and sort out the requests waiting on it. */
  _lost() {
    this.socket = null;
    this.pingSent.clear();
    this._stopTimers();
    for (const entry of new Set(this.pending.values())) {
      const [message] = entry.frames;
      const frames = entry.frames.map((frame) => JSON.stringify(frame));
      if (this.queue.includes(frames[0])) continue; // never sent: it goes out on the next socket
      if (isIdempotent(message)) {
        this.queue.push(...frames); // sent again, with the ping that settles it
      } else {
        for (const rid of entry.rids) this.pending.delete(rid);
        clearTimeout(entry.timer);
        entry.reject(new ServerError("client/disconnected", `the connection dropped before the server answered ${message.type}`));
      }
    }
  }

  _startHeartbeat() {
    this._stopTimers();
    this.unansweredSince = null;
    this.lastPing = Date.now();
    this.heartbeat = setInterval(() => {
      const now = Date.now();
      if (this.unansweredSince !== null) {
        if (now - this.unansweredSince > PONG_TIMEOUT_MS) this.dropSocket("no pong");
      } else if (now - this.lastPing >= PING_EVERY_MS) {
        this._ping();
      }
    }, TICK_MS);
  }

  _ping() {
    this.lastPing = Date.now();
    if (this.unansweredSince === null) this.unansweredSince = this.lastPing;
    this.sendWithRid({ type: "ping" });
  }

  _stopTimers() {
    clearInterval(this.heartbeat);
    clearTimeout(this.connectTimer);
    this.heartbeat = null;
  }

  _scheduleRetry() {
    clearTimeout(this.retryTimer);
    this.attempt += 1;
    this._setStatus("reconnecting");
    this.retryTimer = setTimeout(() => this._open(), backoffDelay(this.attempt));
  }

  _receive(data) {
    let message;
    try {
      message = JSON.parse(data);
    } catch {
      return; // the browser asks for JSON; anything else is not for us
    }
    if (message.type === "pong") this._clockSample(message);
    // Promise callbacks run after this handler, so the app has seen the message (a seat,
    // a state) before a waiting caller resumes.
    const answered = this._answer(message);
    if (!(answered && message.type === "error")) {
      // An error that answers a request is the requester's to show.
      this.dispatchEvent(new CustomEvent("message", { detail: message }));
    }
  }

  /** A pong with the server's time: one estimate of the offset between the two clocks. */
  _clockSample(message) {
    const sent = this.pingSent.get(message.rid);
    this.pingSent.delete(message.rid);
    if (sent === undefined || typeof message.at !== "number") return;
    const now = Date.now();
    // The server read its clock about half way through the round trip.
    this.offsetSamples.push({ rtt: now - sent, offset: message.at - (sent + now) / 2 });
    if (this.offsetSamples.length > OFFSET_SAMPLES) this.offsetSamples.shift();
    const best = this.offsetSamples.reduce((a, b) => (b.rtt < a.rtt ? b : a));
    this.offsetMs = best.offset;
  }

  _answer(message) {
    const entry = message.rid === undefined ? undefined : this.pending.get(message.rid);
    if (!entry) return false;
    for (const rid of entry.rids) this.pending.delete(rid);
    clearTimeout(entry.timer);
    if (message.type === "error") entry.reject(new ServerError(message.code, message.message, message));
    else entry.resolve(message);
    return true;
  }
}
