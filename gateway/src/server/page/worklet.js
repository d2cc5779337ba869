// The microphone's audio as 16 kHz pcm16 in 20 ms chunks, resampled here
// on the audio thread: each chunk goes to the page with its RMS level.
class Pcm16Chunker extends AudioWorkletProcessor {
  constructor(options) {
    super();
    const o = (options && options.processorOptions) || {};
    this.rate = o.rate || 16000;
    this.size = Math.round((this.rate * (o.chunkMs || 20)) / 1000);
    this.step = sampleRate / this.rate; // input samples per output sample
    this.at = 0; // position of the next output sample in the input stream
    this.last = 0; // the previous block's last input sample
    this.chunk = new Int16Array(this.size);
    this.filled = 0;
    this.energy = 0;
  }

  process(inputs) {
    const input = inputs[0] && inputs[0][0];
    if (!input) return true;
    // Linear interpolation between input samples; `at` runs over the
    // block, from -1 (the previous block's last sample) to its end.
    while (this.at < input.length - 1) {
      const i = Math.floor(this.at);
      const frac = this.at - i;
      const a = i < 0 ? this.last : input[i];
      const b = input[i + 1];
      const s = Math.max(-1, Math.min(1, a + (b - a) * frac));
      this.chunk[this.filled++] = s < 0 ? s * 0x8000 : s * 0x7fff;
      this.energy += s * s;
      if (this.filled === this.size) {
        const level = Math.sqrt(this.energy / this.size);
        this.port.postMessage({ pcm: this.chunk.buffer, level }, [this.chunk.buffer]);
        this.chunk = new Int16Array(this.size);
        this.filled = 0;
        this.energy = 0;
      }
      this.at += this.step;
    }
    this.at -= input.length;
    this.last = input[input.length - 1];
    return true;
  }
}

registerProcessor("pcm16-chunker", Pcm16Chunker);

// The engine's audio (16 kHz pcm16 pieces from the page) played at the
// context's rate, linearly interpolated; "clear" drops what is queued (a
// barge-in). Every 100 ms it tells the page how many 16 kHz samples it
// has played.
class Pcm16Player extends AudioWorkletProcessor {
  constructor(options) {
    super();
    const o = (options && options.processorOptions) || {};
    this.step = (o.rate || 16000) / sampleRate; // source samples per output sample
    this.queue = []; // Float32Arrays of source samples
    this.at = 0; // position in queue[0]
    this.played = 0;
    this.reported = 0;
    this.port.onmessage = (e) => {
      if (e.data === "clear") {
        this.queue = [];
        this.at = 0;
        return;
      }
      const pcm = new Int16Array(e.data);
      const f = new Float32Array(pcm.length);
      for (let i = 0; i < pcm.length; i++) f[i] = pcm[i] / 0x8000;
      this.queue.push(f);
    };
  }

  process(_inputs, outputs) {
    const out = outputs[0];
    const first = out[0];
    for (let n = 0; n < first.length; n++) {
      while (this.queue.length && this.at >= this.queue[0].length) {
        this.at -= this.queue[0].length;
        this.queue.shift();
      }
      if (!this.queue.length) {
        this.at = 0;
        first[n] = 0;
        continue;
      }
      const q = this.queue[0];
      const i = Math.floor(this.at);
      const a = q[i];
      const b = i + 1 < q.length ? q[i + 1] : this.queue.length > 1 ? this.queue[1][0] : a;
      first[n] = a + (b - a) * (this.at - i);
      const before = Math.floor(this.at);
      this.at += this.step;
      this.played += Math.floor(this.at) - before;
    }
    for (let c = 1; c < out.length; c++) out[c].set(first);
    if (this.played - this.reported >= 1600) {
      this.reported = this.played;
      this.port.postMessage({ played: this.played });
    }
    return true;
  }
}

registerProcessor("pcm16-player", Pcm16Player);
