package hostcerts

import (
	"bytes"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// parsePlist reads an XML property list (what `security
// trust-settings-export` writes) into Go values: dict is map[string]any,
// array []any, data []byte, integer int64, true/false bool, and string,
// date and real their text. Only the XML form is read; the binary form
// never comes out of that command.
func parsePlist(b []byte) (any, error) {
	d := xml.NewDecoder(bytes.NewReader(b))
	d.Strict = true
	for {
		tok, err := d.Token()
		if err != nil {
			return nil, fmt.Errorf("property list: %w", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if se.Name.Local != "plist" {
				return nil, fmt.Errorf("property list: starts with <%s>, want <plist>", se.Name.Local)
			}
			v, err := plistValueIn(d, 0)
			if err != nil {
				return nil, fmt.Errorf("property list: %w", err)
			}
			return v, nil
		}
	}
}

// maxPlistDepth bounds nesting: trust settings are four levels deep, and
// a file made to be deeper must not exhaust the stack.
const maxPlistDepth = 32

// plistValueIn reads the one value inside the element just opened, and
// its end tag.
func plistValueIn(d *xml.Decoder, depth int) (any, error) {
	var v any
	seen := false
	for {
		tok, err := d.Token()
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if seen {
				return nil, fmt.Errorf("a second value <%s> where one is allowed", t.Name.Local)
			}
			if v, err = plistValue(d, t, depth); err != nil {
				return nil, err
			}
			seen = true
		case xml.EndElement:
			if !seen {
				return nil, errors.New("an empty <plist>")
			}
			return v, nil
		}
	}
}

// plistValue reads the element start opened.
func plistValue(d *xml.Decoder, start xml.StartElement, depth int) (any, error) {
	if depth > maxPlistDepth {
		return nil, fmt.Errorf("nested deeper than %d", maxPlistDepth)
	}
	switch start.Name.Local {
	case "dict":
		return plistDict(d, depth)
	case "array":
		return plistArray(d, depth)
	case "true", "false":
		return start.Name.Local == "true", d.Skip()
	}
	text, err := elementText(d)
	if err != nil {
		return nil, err
	}
	switch start.Name.Local {
	case "string", "date", "real":
		return text, nil
	case "integer":
		n, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("<integer>%s</integer>: %w", text, err)
		}
		return n, nil
	case "data":
		b, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(text), ""))
		if err != nil {
			return nil, fmt.Errorf("<data>: %w", err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("unknown element <%s>", start.Name.Local)
}

func plistDict(d *xml.Decoder, depth int) (map[string]any, error) {
	out := map[string]any{}
	key, haveKey := "", false
	for {
		tok, err := d.Token()
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.EndElement:
			if haveKey {
				return nil, fmt.Errorf("<key>%s</key> without a value", key)
			}
			return out, nil
		case xml.StartElement:
			if !haveKey {
				if t.Name.Local != "key" {
					return nil, fmt.Errorf("<%s> in a <dict> where a <key> belongs", t.Name.Local)
				}
				if key, err = elementText(d); err != nil {
					return nil, err
				}
				haveKey = true
				continue
			}
			if out[key], err = plistValue(d, t, depth+1); err != nil {
				return nil, err
			}
			haveKey = false
		}
	}
}

func plistArray(d *xml.Decoder, depth int) ([]any, error) {
	out := []any{}
	for {
		tok, err := d.Token()
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.EndElement:
			return out, nil
		case xml.StartElement:
			v, err := plistValue(d, t, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
	}
}

// elementText reads character data up to the element's end; a child
// element is an error.
func elementText(d *xml.Decoder) (string, error) {
	var sb strings.Builder
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return "", io.ErrUnexpectedEOF
		}
		if err != nil {
			return "", err
		}
		switch t := tok.(type) {
		case xml.CharData:
			sb.Write(t)
		case xml.StartElement:
			return "", fmt.Errorf("<%s> inside a value", t.Name.Local)
		case xml.EndElement:
			return sb.String(), nil
		}
	}
}
