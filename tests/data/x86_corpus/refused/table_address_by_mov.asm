section .rodata
    cities dd paris, oslo
    paris db "Paris", 0
    oslo db "Oslo", 0
section .text
    mov esi, cities
    mov ecx, 1
    push dword [esi + ecx*4]
    call get_temperature
