{{ cookiecutter.license_header }}
"""{{ cookiecutter.camel }}: base LM + side computation (omnitts pattern native-ar)."""

{% set n = cookiecutter.name %}{% set c = cookiecutter.camel %}{% set entries = [("configuration_" ~ n, c ~ "Config"), ("modeling_" ~ n, c ~ "ForConditionalGeneration")] %}{% for module, cls in entries | sort %}from .{{ module }} import {{ cls }}
{% endfor %}
__all__ = [
    "{{ c }}Config",
    "{{ c }}ForConditionalGeneration",
]
