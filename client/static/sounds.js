// The game screen's sounds, made on the spot with the Web Audio API (no audio files):
// a wooden knock for a move, a heavier one for a capture, two rising tones for check, three
// short beeps when your clock runs low, a little chord at the end of a game and a soft
// two-note chime for an offer. All of them are our own, a few lines of synthesis each.
//
// The switch is prefs "sound" (on by default), kept in localStorage and changed from the
// game screen's mute button or the settings dialog. Every sound played is also remembered
// by name (the last few), which window.kibitz.sounds shows to tests.

import { prefs } from "./storage.js";

/** The names of the sounds, for playSound(). */
export const SOUND_NAMES = ["move", "capture", "check", "lowtime", "end", "notify"];

const KEEP = 20; // names remembered for recentSounds()
const recent = [];
let context = null;

/** Whether sounds are on (prefs "sound"). */
export function soundOn() {
  return prefs.get("sound", true) !== false;
}

/** Turn sounds on or off; kept across reloads. */
export function setSoundOn(on) {
  prefs.set("sound", Boolean(on));
  window.dispatchEvent(new CustomEvent("kibitz:prefs", { detail: { name: "sound" } }));
}

/** The names of the last sounds played, oldest first. */
export function recentSounds() {
  return recent.slice();
}

/** The page's audio context, made on first use; null where the browser has none. */
function audio() {
  if (!context) {
    const Context = window.AudioContext || window.webkitAudioContext;
    if (!Context) return null;
    try {
      context = new Context();
    } catch {
      return null;
    }
  }
  if (context.state === "suspended") context.resume().catch(() => {});
  return context;
}

// Browsers start audio only after a gesture: a click or a key wakes the context.
for (const type of ["pointerdown", "keydown"]) {
  window.addEventListener(type, () => soundOn() && audio(), { capture: true, passive: true });
}

/** One tone: `freq` Hz (gliding to `to`), `start` s from now, `length` s, a quick decay. */
function tone(ac, { freq, to = freq, start = 0, length = 0.12, type = "sine", level = 0.2 }) {
  const t0 = ac.currentTime + start;
  const osc = ac.createOscillator();
  const gain = ac.createGain();
  osc.type = type;
  osc.frequency.setValueAtTime(freq, t0);
  if (to !== freq) osc.frequency.exponentialRampToValueAtTime(to, t0 + length);
  gain.gain.setValueAtTime(0.0001, t0);
  gain.gain.exponentialRampToValueAtTime(level, t0 + 0.008);
  gain.gain.exponentialRampToValueAtTime(0.0001, t0 + length);
  osc.connect(gain).connect(ac.destination);
  osc.start(t0);
  osc.stop(t0 + length + 0.02);
}

/** A knock: a burst of noise through a band-pass filter at `band` Hz, plus a low thump. */
function knock(ac, { band = 1800, length = 0.06, level = 0.35, thump = 170, start = 0 }) {
  const t0 = ac.currentTime + start;
  const frames = Math.max(1, Math.floor(ac.sampleRate * length));
  const buffer = ac.createBuffer(1, frames, ac.sampleRate);
  const data = buffer.getChannelData(0);
  for (let i = 0; i < frames; i++) data[i] = (Math.random() * 2 - 1) * (1 - i / frames) ** 3;
  const noise = ac.createBufferSource();
  noise.buffer = buffer;
  const filter = ac.createBiquadFilter();
  filter.type = "bandpass";
  filter.frequency.value = band;
  filter.Q.value = 1.2;
  const gain = ac.createGain();
  gain.gain.value = level;
  noise.connect(filter).connect(gain).connect(ac.destination);
  noise.start(t0);
  tone(ac, { freq: thump, to: thump * 0.6, start, length: length + 0.03, level: level * 0.5 });
}

const VOICES = {
  move: (ac) => knock(ac, {}),
  capture: (ac) => {
    knock(ac, { band: 1200, level: 0.45, thump: 130, length: 0.08 });
    knock(ac, { band: 2200, level: 0.25, thump: 200, length: 0.05, start: 0.06 });
  },
  check: (ac) => {
    knock(ac, {});
    tone(ac, { freq: 660, start: 0.04, length: 0.1, type: "triangle", level: 0.15 });
    tone(ac, { freq: 880, start: 0.14, length: 0.14, type: "triangle", level: 0.15 });
  },
  lowtime: (ac) => {
    for (const start of [0, 0.16, 0.32]) tone(ac, { freq: 990, start, length: 0.08, type: "square", level: 0.06 });
  },
  end: (ac) => {
    [523.25, 659.25, 783.99].forEach((freq, i) => tone(ac, { freq, start: i * 0.09, length: 0.4, level: 0.14 }));
  },
  notify: (ac) => {
    tone(ac, { freq: 740, length: 0.16, level: 0.12 });
    tone(ac, { freq: 988, start: 0.12, length: 0.22, level: 0.12 });
  },
};

/** Play the sound `name` (one of SOUND_NAMES) unless sounds are off. */
export function playSound(name) {
  if (!soundOn() || !VOICES[name]) return;
  recent.push(name);
  if (recent.length > KEEP) recent.splice(0, recent.length - KEEP);
  const ac = audio();
  if (!ac) return;
  try {
    VOICES[name](ac);
  } catch {
    // A browser that refuses to make sound: the game goes on silently.
  }
}
