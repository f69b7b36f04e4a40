package config

import "testing"

func TestImageScheme(t *testing.T) {
	tests := []struct {
		ref string
		ok  bool
	}{
		{"", true}, {"vmdock", true}, {"mine", true}, {"./disk.img", true}, {"/abs/img.tar.zst", true},
		{"file:///abs/img.tar.zst", true}, {"http://127.0.0.1/x.img", true}, {"https://example.com/x.qcow2", true},
		{"ftp://example.com/x.img", false}, {"s3://bucket/x", false}, {"HTTPS://example.com/x", false}, {"./dir://x", false},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			c := validConfig(t, linuxHost)
			c.Image = tt.ref
			err := c.ValidateOn(linuxHost)
			if tt.ok {
				if err != nil {
					t.Fatalf("ValidateOn: %v", err)
				}
				return
			}
			oneLineErr(t, err, "image: \""+tt.ref+"\" is not accepted", "file://, http:// or https:// URL")
		})
	}
}
