'use strict';

const SIZES = { d: 86400000, h: 3600000, m: 60000, s: 1000, ms: 1 };

// parseDuration('1h 30m') -> 5400000: the units formatDuration writes, plus 'ms'. Parts may
// be separated by spaces or not ('1h30m') and have a fraction ('1.5h', '.5s'); the total is
// rounded to whole milliseconds; text without any duration in it is an error.
function parseDuration(text) {
  const pattern = /(\d*\.?\d+)\s*(ms|d|h|m|s)/g;
  let total = 0;
  let found = false;
  for (const [, amount, unit] of String(text).matchAll(pattern)) {
    total += Number(amount) * SIZES[unit];
    found = true;
  }
  if (!found) {
    throw new Error(`parseDuration: no duration in ${JSON.stringify(text)}`);
  }
  return Math.round(total);
}

module.exports = { parseDuration };
