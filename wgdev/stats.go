package wgdev

import (
	"bufio"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// PeerStats is what the device knows about one peer.
type PeerStats struct {
	PublicKey     string // base64
	Endpoint      string
	LastHandshake time.Time // zero if none
	RxBytes       uint64
	TxBytes       uint64
}

// Peers returns the current state of every peer.
func (d *Device) Peers() ([]PeerStats, error) {
	s, err := d.dev.IpcGet()
	if err != nil {
		return nil, fmt.Errorf("wgdev: read state: %w", err)
	}
	return parsePeers(s)
}

func parsePeers(uapi string) ([]PeerStats, error) {
	var out []PeerStats
	var cur *PeerStats
	var sec, nsec int64
	flush := func() {
		if cur != nil && (sec != 0 || nsec != 0) {
			cur.LastHandshake = time.Unix(sec, nsec)
		}
	}
	sc := bufio.NewScanner(strings.NewReader(uapi))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		if k == "public_key" {
			flush()
			raw, err := hex.DecodeString(v)
			if err != nil {
				return nil, fmt.Errorf("wgdev: parse state: public key %q: %w", v, err)
			}
			out = append(out, PeerStats{PublicKey: base64.StdEncoding.EncodeToString(raw)})
			cur, sec, nsec = &out[len(out)-1], 0, 0
			continue
		}
		if cur == nil {
			continue
		}
		switch k {
		case "endpoint":
			cur.Endpoint = v
		case "last_handshake_time_sec":
			sec, _ = strconv.ParseInt(v, 10, 64)
		case "last_handshake_time_nsec":
			nsec, _ = strconv.ParseInt(v, 10, 64)
		case "rx_bytes":
			cur.RxBytes, _ = strconv.ParseUint(v, 10, 64)
		case "tx_bytes":
			cur.TxBytes, _ = strconv.ParseUint(v, 10, 64)
		}
	}
	flush()
	return out, nil
}
