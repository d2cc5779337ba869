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
