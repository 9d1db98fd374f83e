package typescript

import (
	"encoding/json"
	"sort"
	"strings"
)

// sourceMap is the part of a v3 source map needed to map a generated
// position to its source: for each generated line, the segments sorted by
// generated column. Lines and columns are 0-based.
type sourceMap struct {
	lines [][]segment
}

type segment struct {
	genCol, srcLine, srcCol int
}

func parseSourceMap(raw []byte) (*sourceMap, error) {
	var m struct {
		Mappings string `json:"mappings"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	sm := &sourceMap{}
	srcLine, srcCol, src := 0, 0, 0
	for _, line := range strings.Split(m.Mappings, ";") {
		var segs []segment
		genCol := 0
		for _, field := range strings.Split(line, ",") {
			if field == "" {
				continue
			}
			vals, err := decodeVLQ(field)
			if err != nil {
				return nil, err
			}
			genCol += vals[0]
			if len(vals) < 4 {
				continue
			}
			src += vals[1]
			srcLine += vals[2]
			srcCol += vals[3]
			segs = append(segs, segment{genCol: genCol, srcLine: srcLine, srcCol: srcCol})
		}
		sort.SliceStable(segs, func(i, j int) bool { return segs[i].genCol < segs[j].genCol })
		sm.lines = append(sm.lines, segs)
	}
	_ = src
	return sm, nil
}

// lookup returns the source position of the last segment at or before the
// generated position.
func (sm *sourceMap) lookup(line, col int) (int, int, bool) {
	if line < 0 || line >= len(sm.lines) {
		return 0, 0, false
	}
	segs := sm.lines[line]
	i := sort.Search(len(segs), func(i int) bool { return segs[i].genCol > col }) - 1
	if i < 0 {
		if len(segs) == 0 {
			return 0, 0, false
		}
		i = 0
	}
	return segs[i].srcLine, segs[i].srcCol, true
}

const base64Digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

func decodeVLQ(s string) ([]int, error) {
	var out []int
	val, shift := 0, 0
	for i := 0; i < len(s); i++ {
		d := strings.IndexByte(base64Digits, s[i])
		if d < 0 {
			return nil, errBadMap
		}
		val |= (d & 31) << shift
		if d&32 != 0 {
			shift += 5
			if shift > 30 {
				return nil, errBadMap
			}
			continue
		}
		if val&1 != 0 {
			out = append(out, -(val >> 1))
		} else {
			out = append(out, val>>1)
		}
		val, shift = 0, 0
	}
	if shift != 0 {
		return nil, errBadMap
	}
	return out, nil
}
