'use strict';

const UNITS = [
  ['d', 86400000],
  ['h', 3600000],
  ['m', 60000],
  ['s', 1000],
];

// formatDuration(5400000) -> '1h 30m'. Milliseconds are rounded to whole seconds and units
// whose count is zero are left out; `largest` keeps only that many of the biggest units
// (formatDuration(93784000, { largest: 2 }) -> '1d 2h').
function formatDuration(ms, options = {}) {
  if (!Number.isFinite(ms)) {
    throw new TypeError(`formatDuration: expected a finite number of milliseconds, got ${ms}`);
  }
  const largest = options.largest ?? UNITS.length;
  const sign = ms < 0 ? '-' : '';
  let rest = Math.round(Math.abs(ms) / 1000) * 1000;
  const parts = [];
  for (const [unit, size] of UNITS) {
    if (rest >= size) {
      const count = Math.floor(rest / size);
      rest -= count * size;
      parts.push(count + unit);
    }
  }
  if (parts.length === 0) return '0s';
  return sign + parts.slice(0, largest).join(' ');
}

module.exports = { formatDuration };
