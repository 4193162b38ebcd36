// Package filter compiles a consumer's subscription expression and matches
// messages against it, on the node that serves the pull, so that messages a
// consumer does not want never travel.
//
// Two kinds, as RocketMQ's ExpressionType:
//
//   - TAG: "*" or "" (everything), or tags joined by "||" ("TagA || TagB"),
//     split and trimmed as RocketMQ's SubscriptionData. A message without a
//     tag matches only "*".
//   - SQL92: RocketMQ's subset of SQL92 over message properties (=, <>, <,
//     <=, >, >=, BETWEEN, IN, IS [NOT] NULL, AND, OR, NOT, parentheses,
//     'string', integer, decimal, TRUE, FALSE); the tag is the property TAGS.
//
// It is pure: no I/O, no goroutines, no broker types. It never panics on any
// input; a bad expression is an *Error naming the position and what was
// expected.
package filter
