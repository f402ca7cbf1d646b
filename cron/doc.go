// # Syntax
//
// An expression has five fields, "minute hour day-of-month month
// day-of-week", each a comma list of items: a number, a name (JAN-DEC,
// SUN-SAT, any case), "*", a range "a-b", a step "*/s", "a-b/s" or "a/s"
// (a up to the field's maximum). Day-of-week is 0-7 with 0 and 7 = Sunday.
// Day-of-month accepts L (last day of the month, also in lists: "1,L");
// day-of-week accepts d#n, the nth weekday d of the month (n 1-5, "SUN#3").
// The seed's field form (Fields) means the same, an empty field being "*".
// Input is limited to 1024 bytes; a day-of-month that can never occur in the
// chosen months ("0 0 30 2 *") is rejected.
//
// # Restricted fields and the OR rule
//
// A field is restricted iff its value set is not the field's full range; L
// and d#n always make their field restricted, and so does a step such as
// "*/2" (only "*" or a full range such as "0-6" is unrestricted). When both
// day-of-month and day-of-week are restricted a day matches if either does
// (classic cron: "0 0 13 * 5" fires on every 13th and on every Friday);
// otherwise only the restricted one counts.
//
// # Children and LaunchExpressions
//
// Children are classified by the most significant restricted field:
// month+day-of-month MM, month+day-of-week MW, day-of-month M, day-of-week
// W, month only MO, none H. With both day fields restricted a schedule has
// children of both day classes. There is one child per (LaunchExpression,
// minute). LaunchExpression formats, with two-digit mm (month), dd (day of
// month) and hh (hour, or "*" when the schedule runs in every hour), d a
// weekday 0-6 and n 1-5:
//
//	H:hh
//	W:d:hh      W:d#n:hh
//	M:dd:hh     M:L:hh
//	MO:mm:hh
//	MM:mm:dd:hh MM:mm:L:hh
//	MW:mm:d:hh  MW:mm:d#n:hh
//
// Key.String appends "@" and the two-digit minute, e.g. "MW:01:0#3:09@00".
//
// # Time zones and DST
//
// Schedules run on the wall clock of their IANA zone. A wall time skipped
// by a spring-forward gap fires once, at the first instant after the gap; a
// wall time repeated by a fall-back fires once, at its first occurrence.
// Schedules whose hour is "*" (every hour) instead fire on every real minute
// that matches: both repeated minutes, and none of the skipped ones. The
// rules assume minute-aligned UTC offsets (true of all zones since 1980).
package cron
