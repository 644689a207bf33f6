package main

import "regexp"

// portItem is a bare port or port range: never a rule of its own.
var portItem = regexp.MustCompile(`^[0-9]+(-[0-9]+)?$`)

// mergePortLists undoes the flag library's split at commas for rule lists
// whose rules carry comma-separated ports: "--allow 10.0.0.0/8:80,443"
// arrives as ["10.0.0.0/8:80", "443"] and becomes one rule again. A bare
// port cannot be a rule (a rule starts with an address), so the merge is
// unambiguous; MESHLAUNCH_ALLOW="10.96.0.0/12,10.0.0.0/8:80,443" works too.
func mergePortLists(values []string) []string {
	out := make([]string, 0, len(values))
	for _, v := range values {
		if len(out) > 0 && portItem.MatchString(v) {
			out[len(out)-1] += "," + v
			continue
		}
		out = append(out, v)
	}
	return out
}
