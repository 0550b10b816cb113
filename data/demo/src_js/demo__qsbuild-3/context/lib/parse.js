'use strict';

// parse('q=cat&page=2') -> { q: 'cat', page: '2' }: the reverse of stringify. A leading '?'
// is ignored, '+' reads as a space, a key without '=' gets the empty string, and every value
// is a string.
function decode(text) {
  return decodeURIComponent(text.replace(/\+/g, ' '));
}

function parse(query) {
  const result = {};
  const text = query.startsWith('?') ? query.slice(1) : query;
  if (text === '') return result;
  for (const part of text.split('&')) {
    const eq = part.indexOf('=');
    const key = decode(eq === -1 ? part : part.slice(0, eq));
    const value = eq === -1 ? '' : decode(part.slice(eq + 1));
    result[key] = value;
  }
  return result;
}

module.exports = { parse };
