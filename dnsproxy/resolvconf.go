package dnsproxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// ResolvConf is what matters of a resolv.conf.
type ResolvConf struct {
	Nameservers []netip.Addr
	Search      []string
	Ndots       int      // default 1 when absent (glibc default)
	Options     []string // other options verbatim, e.g. "edns0", "timeout:2"
}

// maxNdots is glibc's RES_MAXNDOTS: larger values are clamped to it.
const maxNdots = 15

var errNoNameserver = errors.New(`no usable "nameserver" line`)

// ParseResolvConf reads a resolv.conf. It is as tolerant as glibc: comment
// lines and trailing comments (# or ;), unknown keywords and unparsable
// nameserver addresses are ignored; zoned IPv6 nameservers are kept. A
// "domain" line is a one-element search list when there is no "search" line.
// It fails only when r cannot be read or yields no nameserver; the error does
// not name the file, the caller does.
func ParseResolvConf(r io.Reader) (ResolvConf, error) {
	rc, err := parseResolvConf(r)
	if err != nil {
		return ResolvConf{}, fmt.Errorf("dnsproxy: parse resolv.conf: %w", err)
	}
	return rc, nil
}

// ReadResolvConf parses the resolv.conf at path (usually /etc/resolv.conf).
func ReadResolvConf(path string) (ResolvConf, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return ResolvConf{}, fmt.Errorf("dnsproxy: read resolv.conf: %w", err)
	}
	rc, err := parseResolvConf(bytes.NewReader(b))
	if err != nil {
		return ResolvConf{}, fmt.Errorf("dnsproxy: parse %s: %w", path, err)
	}
	return rc, nil
}

func parseResolvConf(r io.Reader) (ResolvConf, error) {
	p := rcParser{rc: ResolvConf{Ndots: 1}}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		p.line(strings.Fields(stripComment(sc.Text())))
	}
	if err := sc.Err(); err != nil {
		return ResolvConf{}, err
	}
	return p.result()
}

// rcParser accumulates resolv.conf lines.
type rcParser struct {
	rc         ResolvConf
	haveSearch bool
	domain     []string
}

func (p *rcParser) line(fields []string) {
	if len(fields) == 0 {
		return
	}
	args := fields[1:]
	switch fields[0] {
	case "nameserver":
		if a, err := netip.ParseAddr(first(args)); err == nil {
			p.rc.Nameservers = append(p.rc.Nameservers, a)
		}
	case "search": // the last search line wins, as in glibc
		p.rc.Search = nonEmpty(args)
		p.haveSearch = true
	case "domain":
		p.domain = nonEmpty(args[:min(len(args), 1)])
	case "options":
		for _, o := range args {
			p.option(o)
		}
	}
}

func (p *rcParser) option(o string) {
	v, ok := strings.CutPrefix(o, "ndots:")
	if !ok {
		p.rc.Options = append(p.rc.Options, o)
		return
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		p.rc.Ndots = min(n, maxNdots)
	}
}

func (p *rcParser) result() (ResolvConf, error) {
	if !p.haveSearch {
		p.rc.Search = p.domain
	}
	if len(p.rc.Nameservers) == 0 {
		return ResolvConf{}, errNoNameserver
	}
	return p.rc, nil
}

// Render returns a resolv.conf for the job: nameserver as its only
// nameserver, and rc's search list, ndots and options. Parsing the result
// yields rc with Nameservers replaced by nameserver.
func (rc ResolvConf) Render(nameserver netip.Addr) []byte {
	var b bytes.Buffer
	b.WriteString("# Written by meshlaunch: the shadow pod's resolver settings, served through the tunnel.\n")
	fmt.Fprintf(&b, "nameserver %s\n", nameserver)
	if len(rc.Search) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(rc.Search, " "))
	}
	opts := []string{"ndots:" + strconv.Itoa(rc.Ndots)}
	for _, o := range rc.Options {
		if !strings.HasPrefix(o, "ndots:") {
			opts = append(opts, o)
		}
	}
	fmt.Fprintf(&b, "options %s\n", strings.Join(opts, " "))
	return b.Bytes()
}

// stripComment removes a comment started by # or ; anywhere on the line.
func stripComment(line string) string {
	if i := strings.IndexAny(line, "#;"); i >= 0 {
		return line[:i]
	}
	return line
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// nonEmpty copies s, returning nil for an empty list.
func nonEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return append([]string(nil), s...)
}
