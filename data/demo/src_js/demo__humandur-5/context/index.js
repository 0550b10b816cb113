'use strict';

const { formatDuration } = require('./lib/format');
const { parseDuration } = require('./lib/parse');

module.exports = { formatDuration, parseDuration };
