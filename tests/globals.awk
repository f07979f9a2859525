# Print "FILE NAME" for every variable of static storage that a C file
# may change: file-scope variables and function-local statics, const ones
# left out.  It reads the project's style(9) layout: a file-scope
# declaration starts in column 0, a local static after one tab.
# Whether the declared object itself is const: "const int x", "const char
# *const p"; not "const char *p", a pointer the program may change.
function constant(decl,    s) {
	s = decl
	sub(/[ \t]*=.*$/, "", s)
	if (s ~ /\*[ \t]*const[ \t]/)
		return 1
	return s ~ /(^|[ \t])const[ \t]/ && s !~ /\*/
}
function report(decl,    s) {
	s = decl
	sub(/[ \t]*=.*$/, "", s)
	sub(/;$/, "", s)
	gsub(/\[[^]]*\]/, "", s)
	n = split(s, w, /[ \t*]+/)
	print FILENAME, w[n]
}
{ sub(/[ \t]*\/\*.*\*\/[ \t]*$/, "") }
/^static struct \{/	{ instruct = 1; next }
instruct && /^\}/	{ s = $0; sub(/^\}[ \t]*/, "", s); report(s); instruct = 0; next }
instruct		{ next }
/^(static[ \t]+)?(const[ \t]+)?(volatile[ \t]+)?(unsigned[ \t]+)?(struct[ \t]+|enum[ \t]+)?[a-z_][a-z_0-9]*[ \t*]+[a-z_][a-z_0-9]*(\[[^]]*\])*([ \t]*=.*)?;$/ {
	if ($0 ~ /^extern|^typedef|^return|^struct [a-z_]+;$|^enum [a-z_]+;$/ ||
	    constant($0))
		next
	report($0)
	next
}
/^\t+static[ \t]/ && !/\(/ && !constant($0)	{ report($0) }
