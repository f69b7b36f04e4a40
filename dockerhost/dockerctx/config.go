package dockerctx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// configFile is config.json as an ordered list of top-level keys with
// their raw values, so a rewrite changes nothing but the key we set.
type configFile struct {
	keys []string
	vals map[string]json.RawMessage
}

func readConfig(path string) (*configFile, error) {
	cfg := &configFile{vals: map[string]json.RawMessage{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return cfg, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return cfg, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("read %s: not a JSON object", path)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("read %s key %q: %w", path, key, err)
		}
		cfg.set(key, raw)
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return cfg, nil
}

func (c *configFile) get(key string) (json.RawMessage, bool) {
	v, ok := c.vals[key]
	return v, ok
}

func (c *configFile) set(key string, v json.RawMessage) {
	if _, ok := c.vals[key]; !ok {
		c.keys = append(c.keys, key)
	}
	c.vals[key] = v
}

func (c *configFile) delete(key string) bool {
	if _, ok := c.vals[key]; !ok {
		return false
	}
	delete(c.vals, key)
	for i, k := range c.keys {
		if k == key {
			c.keys = append(c.keys[:i], c.keys[i+1:]...)
			break
		}
	}
	return true
}

// encode writes the object the way the docker CLI does (tab-indented).
func (c *configFile) encode() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("{")
	for i, k := range c.keys {
		if i > 0 {
			b.WriteString(",")
		}
		key, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		b.WriteString("\n\t")
		b.Write(key)
		b.WriteString(": ")
		if err := json.Indent(&b, c.vals[k], "\t", "\t"); err != nil {
			return nil, fmt.Errorf("key %s: %w", k, err)
		}
	}
	if len(c.keys) > 0 {
		b.WriteString("\n")
	}
	b.WriteString("}")
	return b.Bytes(), nil
}
