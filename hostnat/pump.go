package hostnat

import (
	"errors"
	"os"

	"golang.zx2c4.com/wireguard/tun"
)

// headroom is the offset at which packets are read: wireguard-go's Linux
// TUN wants room for a virtio-net header in front of each packet.
const headroom = 16

// pump moves batches of packets from src to dst until either is closed.
func (n *NAT) pump(name string, src, dst tun.Device) {
	batch := max(src.BatchSize(), 1)
	mtu := n.cfg.MTU
	bufs := make([][]byte, batch)
	for i := range bufs {
		bufs[i] = make([]byte, headroom+mtu+headroom)
	}
	sizes := make([]int, batch)
	out := make([][]byte, 0, batch)
	for {
		k, err := src.Read(bufs, sizes, headroom)
		if errors.Is(err, tun.ErrTooManySegments) {
			continue // a GSO packet too large for the batch: dropped, TCP resends
		}
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				n.log.Debug("hostnat: pump stopped", "dir", name, "err", err)
			}
			return
		}
		out = out[:0]
		for i := range k {
			out = append(out, bufs[i][:headroom+sizes[i]])
		}
		if _, err := dst.Write(out, headroom); err != nil {
			if errors.Is(err, os.ErrClosed) {
				return
			}
			n.log.Debug("hostnat: dropped packets", "dir", name, "err", err)
		}
	}
}
