# Print "FILE NAME" for every variable of static storage that a C file
# may change: file-scope variables and function-local statics, const ones
# left out.  It reads the project's style(9) layout: a file-scope
# declaration starts in column 0, a local static after one tab.
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
/^(static[ \t]+)?(volatile[ \t]+)?(unsigned[ \t]+)?(struct[ \t]+|enum[ \t]+)?[a-z_][a-z_0-9]*[ \t*]+[a-z_][a-z_0-9]*(\[[^]]*\])*([ \t]*=.*)?;$/ {
	if ($0 ~ /const|^extern|^typedef|^return|^struct [a-z_]+;$|^enum [a-z_]+;$/)
		next
	report($0)
	next
}
/^\tstatic[ \t]/ && !/const/ && !/\(/	{ report($0) }
